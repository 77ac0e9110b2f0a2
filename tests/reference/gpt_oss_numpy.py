#!/usr/bin/env python3
"""A float64 numpy forward of a small gpt-oss GGUF (llama.cpp's openai-moe graph
as read from its source: biases, sinks, even layers sliding, NeoX RoPE without
scaling keys, softmax over the chosen k router logits, clamped SwiGLU), greedy.
Slow (recomputes the whole sequence per token); for the random models only.
Issue 54: spate's greedy tokens on random-gpt-oss-q.gguf (make_random_models.py
--f32) were compared with it while llama.cpp did not build in time.

Usage: gpt_oss_numpy.py MODEL.gguf N_GEN < prompts (token ids, one prompt a line)
Prints one JSON line per prompt: prompt_ids, steps [[id, logit] x 3] per greedy step.
"""
import sys, json
import numpy as np
import gguf

path = sys.argv[1]
r = gguf.GGUFReader(path)
def kv(k, default=None):
    f = r.fields.get(k)
    if f is None: return default
    v = f.parts[f.data[0]]
    return v[0] if len(v) == 1 else v
A = "gpt-oss."
n_layer = int(kv(A+"block_count")); D = int(kv(A+"embedding_length")); H = int(kv(A+"attention.head_count"))
HKV = int(kv(A+"attention.head_count_kv")); HD = int(kv(A+"attention.key_length", D // H))
E = int(kv(A+"expert_count")); K = int(kv(A+"expert_used_count")); eps = float(kv(A+"attention.layer_norm_rms_epsilon"))
base = float(kv(A+"rope.freq_base", 10000.0)); swa = int(kv(A+"attention.sliding_window"))
assert kv(A+"rope.scaling.type") is None
T = {}
for t in r.tensors:
    a = gguf.quants.dequantize(t.data, t.tensor_type)
    T[t.name] = np.asarray(a, dtype=np.float64).reshape([int(x) for x in reversed(t.shape)]) if t.tensor_type != 0 else np.asarray(t.data, dtype=np.float64).reshape([int(x) for x in reversed(t.shape)])

def rms(x, w): return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps) * w
def rope(x, pos):  # x [n, heads, HD], neox
    half = HD // 2
    inv = base ** (-np.arange(half) * 2.0 / HD)
    ang = pos[:, None] * inv[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x0, x1 = x[..., :half], x[..., half:]
    return np.concatenate([x0 * c - x1 * s, x0 * s + x1 * c], -1)

def forward(tokens):
    n = len(tokens); pos = np.arange(n, dtype=np.float64)
    x = T["token_embd.weight"][tokens]
    for l in range(n_layer):
        p = f"blk.{l}."
        h = rms(x, T[p+"attn_norm.weight"])
        q = h @ T[p+"attn_q.weight"].T + T[p+"attn_q.bias"]
        k = h @ T[p+"attn_k.weight"].T + T[p+"attn_k.bias"]
        v = h @ T[p+"attn_v.weight"].T + T[p+"attn_v.bias"]
        q = rope(q.reshape(n, H, HD), pos); k = rope(k.reshape(n, HKV, HD), pos); v = v.reshape(n, HKV, HD)
        sliding = l % 2 == 0
        out = np.zeros((n, H, HD))
        sinks = T[p+"attn_sinks.weight"]
        for hh in range(H):
            kh = hh // (H // HKV)
            s = q[:, hh, :] @ k[:, kh, :].T / np.sqrt(HD)
            i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
            mask = (j > i) | (sliding & (i - j >= swa))
            s[mask] = -np.inf
            m = np.maximum(s.max(-1), sinks[hh])
            e = np.exp(s - m[:, None]); den = e.sum(-1) + np.exp(sinks[hh] - m)
            out[:, hh, :] = (e / den[:, None]) @ v[:, kh, :]
        x = x + out.reshape(n, H * HD) @ T[p+"attn_output.weight"].T + T[p+"attn_output.bias"]
        h = rms(x, T[p+"post_attention_norm.weight"])
        logits = h @ T[p+"ffn_gate_inp.weight"].T + T[p+"ffn_gate_inp.bias"]
        y = np.zeros_like(x)
        for t in range(n):
            ids = np.argsort(-logits[t], kind="stable")[:K]
            w = np.exp(logits[t, ids] - logits[t, ids].max()); w /= w.sum()
            for e_, wt in zip(ids, w):
                g = T[p+"ffn_gate_exps.weight"][e_] @ h[t] + T[p+"ffn_gate_exps.bias"][e_]
                u = T[p+"ffn_up_exps.weight"][e_] @ h[t] + T[p+"ffn_up_exps.bias"][e_]
                g = np.minimum(g, 7.0); u = np.clip(u, -7.0, 7.0)
                a = g / (1 + np.exp(-1.702 * g)) * (u + 1)
                y[t] += wt * (T[p+"ffn_down_exps.weight"][e_] @ a + T[p+"ffn_down_exps.bias"][e_])
        x = x + y
    return rms(x, T["output_norm.weight"]) @ T["output.weight"].T

if __name__ == "__main__":
    n_gen = int(sys.argv[2])
    for line in sys.stdin:
        toks = [int(t) for t in line.split()]
        if not toks: continue
        steps = []
        cur = list(toks)
        lg = forward(cur)
        # teacher-forced over the prompt, then greedy
        for i in range(n_gen):
            lg = forward(cur)[-1]
            top = np.argsort(-lg, kind="stable")[:3]
            steps.append([[int(t), round(float(lg[t]), 5)] for t in top])
            cur.append(int(top[0]))
        print(json.dumps({"prompt_ids": toks, "steps": steps}), flush=True)
