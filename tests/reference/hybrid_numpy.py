#!/usr/bin/env python3
"""A float64 numpy forward of the hybrid Gated DeltaNet models as llama.cpp
0.3.36 runs them: `qwen35` (Qwen3.5 dense), `qwen35moe` (Qwen3.5 MoE) and
`qwen3next` (Qwen3-Next), read from its source (src/models/qwen35.cpp,
qwen35moe.cpp, qwen3next.cpp, delta-net-base.cpp, ggml-cpu's ssm_conv,
gated_delta_net and rope). Token by token with recurrent and KV state, so a
prompt costs one step per token; for the small random models of
make_random_models.py --hybrid (issue 56).

Per layer (pre-norm; the FFN's norm is post_attention_norm):
  x += mixer(rms(x) * attn_norm);  x += ffn(rms(x) * post_attention_norm)
  mixer, Gated DeltaNet layers (every layer l with (l + 1) % interval != 0,
  or ATTN.recurrent_layers), per token:
    qkv = attn_qkv h (q of the n_k heads, then k, then v of the n_v heads),
    z = attn_gate h;  beta = sigmoid(ssm_beta h), a = ssm_alpha h (Qwen3-Next:
    ssm_ba h, per k-head its r = n_v / n_k betas then its r alphas);
    g = softplus(a + ssm_dt.bias) * ssm_a;
    c = silu(causal depthwise conv of qkv, kernel ssm_conv1d, state = last K-1 inputs);
    q, k L2-normalised per head: x / sqrt(sum x^2 + eps);
    v-head h reads k-head h % n_k (Qwen3.5, tiled) or h // r (Qwen3-Next, interleaved);
    S = exp(g) S;  d = (v - S k) beta;  S += d k^T;  o = S q / sqrt(d_state);
    out = ssm_out (rms(o per head) * ssm_norm * silu(z))
  mixer, full attention layers:
    attn_q h = per head [query | gate]; q, k QK-normed (RMS, weights of head_dim),
    RoPE on the first n_rot dims (NeoX pairs i, i + n_rot/2; Qwen3.5: IMRoPE,
    text positions t = h = w = pos and e = 0), softmax(q k / sqrt(head_dim)) v,
    times sigmoid(gate), attn_output.
  ffn: SwiGLU (qwen35); or softmax router, top-k renormalised, SwiGLU experts,
    plus the shared expert times sigmoid(ffn_gate_inp_shexp . h).
MTP (nextn) layers, the last ATTN.nextn_predict_layers blocks, are not run.

--f16: round as ggml does without flash attention with an F16 KV cache (K and
V stored as F16; q converted to F16 for k.q, the softmax to F16 for its
product with V). --q8act: quantize the input of every product with a Q8_0
weight to Q8_0, as ggml's CPU matmul does (the -q8 models).

Usage: hybrid_numpy.py MODEL.gguf N_GEN TOP_K [--f16] [--q8act] < prompts
         as llama_greedy_dump: one JSON line per prompt (token ids per line),
         steps [[id, logit] x TOP_K]; N_GEN 0: the top at every prompt position
       hybrid_numpy.py MODEL.gguf N_GEN --against LLAMA.jsonl [--f16] [--q8act]
         llama_greedy_dump's output (same N_GEN) on the same model: this forward on the same
         tokens (the prompt, then llama.cpp's greedy tokens), the largest
         |logit difference| over llama.cpp's top-K ids per step, and where the
         top-1 differs; a JSON summary last.
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import gguf


def _f16(x):
    return np.asarray(x, dtype=np.float16).astype(np.float64)


class HybridModel:
    def __init__(self, path: str, f16: bool = False, q8act: bool = False):
        r = gguf.GGUFReader(path)
        self.f16, self.q8act = f16, q8act
        self.arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
        assert self.arch in ("qwen35", "qwen35moe", "qwen3next"), self.arch
        A = self.arch + "."

        def kv(k, default=None):
            f = r.fields.get(A + k)
            if f is None:
                return default
            if len(f.data) > 1 or f.types[0] == gguf.GGUFValueType.ARRAY:
                return [f.parts[i][0].item() for i in f.data]
            return f.parts[f.data[0]][0].item()

        self.n_layer_all = int(kv("block_count"))
        self.n_layer = self.n_layer_all - int(kv("nextn_predict_layers", 0))
        self.D = int(kv("embedding_length"))
        self.H = int(kv("attention.head_count"))
        self.HKV = int(kv("attention.head_count_kv", self.H))
        self.HD = int(kv("attention.key_length", self.D // self.H))
        assert int(kv("attention.value_length", self.HD)) == self.HD
        self.n_rot = int(kv("rope.dimension_count", self.HD))
        self.base = float(kv("rope.freq_base", 10000.0))
        assert kv("rope.scaling.type") is None and kv("rope.scaling.factor") is None
        self.eps = float(kv("attention.layer_norm_rms_epsilon"))
        self.scale_attn = float(kv("attention.scale", 0.0)) or 1.0 / np.sqrt(self.HD)
        self.sections = [int(s) for s in kv("rope.dimension_sections", [])] + [0] * 4
        self.sections = self.sections[:4]
        self.imrope = self.arch in ("qwen35", "qwen35moe")
        if self.imrope:
            assert any(self.sections), "qwen35/qwen35moe need rope.dimension_sections"
        self.d_conv = int(kv("ssm.conv_kernel"))
        self.d_inner = int(kv("ssm.inner_size"))
        self.d_state = int(kv("ssm.state_size"))
        self.n_v = int(kv("ssm.time_step_rank"))
        self.n_k = int(kv("ssm.group_count"))
        self.dk = self.d_state
        self.dv = self.d_inner // self.n_v
        assert self.dv == self.dk, "llama.cpp requires head_k_dim == head_v_dim"
        assert self.n_v % self.n_k == 0
        rec = kv("attention.recurrent_layers")
        if rec is not None:
            self.recurrent = [bool(x) for x in rec][:self.n_layer]
        else:
            interval = int(kv("full_attention_interval", 4))
            self.recurrent = [(l + 1) % interval != 0 for l in range(self.n_layer)]
        self.n_expert = int(kv("expert_count", 0))
        self.n_expert_used = int(kv("expert_used_count", 0))
        self.T, self.types = {}, {}
        for t in r.tensors:
            self.types[t.name] = t.tensor_type
            shape = [int(x) for x in reversed(t.shape)]
            a = gguf.quants.dequantize(t.data, t.tensor_type)
            self.T[t.name] = np.asarray(a, dtype=np.float64).reshape(shape)
        self.router_gaps = []  # per MoE decision: router logit k-th minus (k+1)-th

    # ---- pieces -------------------------------------------------------------
    def mm(self, name, x, expert=None):
        """The weight `name` (expert `expert` of a 3-D one) times x. With q8act, as ggml's CPU
        matmul does for a Q8_0 weight: x quantized to Q8_0 first (blocks of 32, an F16 scale)."""
        w = self.T[name] if expert is None else self.T[name][expert]
        t = self.types[name]
        if self.q8act and t not in (gguf.GGMLQuantizationType.F32,):
            assert t == gguf.GGMLQuantizationType.Q8_0, f"--q8act: {name} is {t.name}, not Q8_0"
            x = gguf.quants.dequantize(gguf.quants.quantize(x.astype(np.float32), t), t).astype(np.float64)
        return w @ x

    def rms(self, x, w):
        return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + self.eps) * w

    def rope(self, x, pos):
        """x [heads, HD] at position pos: NeoX pairs (i, i + n_rot/2) over the first n_rot dims."""
        half = self.n_rot // 2
        i = np.arange(half)
        inv = self.base ** (-2.0 * i / self.n_rot)
        if self.imrope:  # ggml_mrope_cache_init, is_imrope, text positions (t, h, w) = pos, e = 0
            s = self.sections
            sector = i % sum(s)
            uses_pos = (((sector % 3 == 0) & (sector < 3 * s[0])) | ((sector % 3 == 1) & (sector < 3 * s[1])) |
                        ((sector % 3 == 2) & (sector < 3 * s[2])))
            p = np.where(uses_pos, float(pos), 0.0)
        else:
            p = np.full(half, float(pos))
        ang = p * inv
        c, s_ = np.cos(ang), np.sin(ang)
        y = x.copy()
        x0, x1 = x[:, :half], x[:, half:self.n_rot]
        y[:, :half] = x0 * c - x1 * s_
        y[:, half:self.n_rot] = x0 * s_ + x1 * c
        return y

    @staticmethod
    def silu(x):
        return x / (1.0 + np.exp(-x))

    @staticmethod
    def sigmoid(x):
        return 1.0 / (1.0 + np.exp(-x))

    @staticmethod
    def softplus(x):
        return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))

    def new_state(self):
        st = {"pos": 0, "k": {}, "v": {}, "conv": {}, "ssm": {}}
        conv_ch = self.d_inner + 2 * self.n_k * self.d_state
        for l in range(self.n_layer):
            if self.recurrent[l]:
                st["conv"][l] = np.zeros((self.d_conv - 1, conv_ch))
                st["ssm"][l] = np.zeros((self.n_v, self.dv, self.dk))  # S[h] maps q (dk) to o (dv)
            else:
                st["k"][l], st["v"][l] = [], []
        return st

    def deltanet(self, st, l, h):
        T, p = self.T, f"blk.{l}."
        nk, nv, dk, dv = self.n_k, self.n_v, self.dk, self.dv
        r = nv // nk
        qkv = self.mm(p + "attn_qkv.weight", h)
        z = self.mm(p + "attn_gate.weight", h)
        if self.arch == "qwen3next":
            ba = self.mm(p + "ssm_ba.weight", h).reshape(nk, 2 * r)
            b, a = ba[:, :r].reshape(nv), ba[:, r:].reshape(nv)
        else:
            b, a = self.mm(p + "ssm_beta.weight", h), self.mm(p + "ssm_alpha.weight", h)
        beta = self.sigmoid(b)
        g = self.softplus(a + T[p + "ssm_dt.bias"]) * T[p + "ssm_a"]
        w = T[p + "ssm_conv1d.weight"]  # [channels, d_conv]
        xe = np.vstack([st["conv"][l], qkv[None, :]])  # d_conv rows, oldest first
        st["conv"][l] = xe[1:]
        c = self.silu(np.einsum("cj,jc->c", w, xe))
        q = c[:nk * dk].reshape(nk, dk)
        k = c[nk * dk:2 * nk * dk].reshape(nk, dk)
        v = c[2 * nk * dk:].reshape(nv, dv)
        q = q / np.sqrt(np.sum(q * q, -1, keepdims=True) + self.eps)
        k = k / np.sqrt(np.sum(k * k, -1, keepdims=True) + self.eps)
        o = np.empty((nv, dv))
        S = st["ssm"][l]
        for hv in range(nv):
            kh = hv // r if self.arch == "qwen3next" else hv % nk
            Sh = S[hv] * np.exp(g[hv])
            d = (v[hv] - Sh @ k[kh]) * beta[hv]
            Sh = Sh + np.outer(d, k[kh])
            S[hv] = Sh
            o[hv] = (Sh @ q[kh]) / np.sqrt(dv)
        o = self.rms(o, T[p + "ssm_norm.weight"]) * self.silu(z.reshape(nv, dv))
        return self.mm(p + "ssm_out.weight", o.reshape(-1))

    def attention(self, st, l, h):
        T, p = self.T, f"blk.{l}."
        H, HKV, HD = self.H, self.HKV, self.HD
        qf = self.mm(p + "attn_q.weight", h).reshape(H, 2 * HD)
        q, gate = qf[:, :HD], qf[:, HD:].reshape(-1)
        k = self.mm(p + "attn_k.weight", h).reshape(HKV, HD)
        v = self.mm(p + "attn_v.weight", h).reshape(HKV, HD)
        q = self.rope(self.rms(q, T[p + "attn_q_norm.weight"]), st["pos"])
        k = self.rope(self.rms(k, T[p + "attn_k_norm.weight"]), st["pos"])
        if self.f16:
            k, v, q = _f16(k), _f16(v), _f16(q)
        st["k"][l].append(k)
        st["v"][l].append(v)
        K, V = np.stack(st["k"][l]), np.stack(st["v"][l])  # [n, HKV, HD]
        out = np.empty((H, HD))
        for hh in range(H):
            kh = hh // (H // HKV)
            s = K[:, kh, :] @ q[hh] * self.scale_attn
            e = np.exp(s - s.max())
            pr = e / e.sum()
            if self.f16:
                pr = _f16(pr)
            out[hh] = pr @ V[:, kh, :]
        return self.mm(p + "attn_output.weight", out.reshape(-1) * self.sigmoid(gate))

    def ffn(self, l, h):
        T, p = self.T, f"blk.{l}."
        if self.n_expert == 0:
            return self.mm(p + "ffn_down.weight", self.silu(self.mm(p + "ffn_gate.weight", h)) * self.mm(p + "ffn_up.weight", h))
        logits = self.mm(p + "ffn_gate_inp.weight", h)
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        order = np.argsort(-probs, kind="stable")
        sel = order[:self.n_expert_used]
        if self.n_expert_used < self.n_expert:
            self.router_gaps.append(float(logits[order[self.n_expert_used - 1]] - logits[order[self.n_expert_used]]))
        wts = probs[sel] / max(probs[sel].sum(), 6.103515625e-5)
        y = np.zeros_like(h)
        for e_, wt in zip(sel, wts):
            a = self.silu(self.mm(p + "ffn_gate_exps.weight", h, e_)) * self.mm(p + "ffn_up_exps.weight", h, e_)
            y += wt * self.mm(p + "ffn_down_exps.weight", a, e_)
        if p + "ffn_up_shexp.weight" in T:
            a = self.silu(self.mm(p + "ffn_gate_shexp.weight", h)) * self.mm(p + "ffn_up_shexp.weight", h)
            y += self.mm(p + "ffn_down_shexp.weight", a) * self.sigmoid(self.mm(p + "ffn_gate_inp_shexp.weight", h))
        return y

    def step(self, st, tok: int) -> np.ndarray:
        """Feeds one token; returns its logits."""
        T = self.T
        x = T["token_embd.weight"][tok].copy()
        for l in range(self.n_layer):
            p = f"blk.{l}."
            h = self.rms(x, T[p + "attn_norm.weight"])
            x = x + (self.deltanet(st, l, h) if self.recurrent[l] else self.attention(st, l, h))
            x = x + self.ffn(l, self.rms(x, T[p + "post_attention_norm.weight"]))
        st["pos"] += 1
        out = "output.weight" if "output.weight" in T else "token_embd.weight"
        return self.mm(out, self.rms(x, T["output_norm.weight"]))


def top(lg, k):
    ids = np.argsort(-lg, kind="stable")[:k]
    return [[int(t), round(float(lg[t]), 5)] for t in ids]


def run(model: HybridModel, n_gen: int, top_k: int):
    for line in sys.stdin:
        toks = [int(t) for t in line.split()]
        if not toks:
            continue
        st = model.new_state()
        steps = []
        for i, t in enumerate(toks):
            lg = model.step(st, t)
            if n_gen == 0:
                steps.append(top(lg, top_k))
        for i in range(n_gen):
            steps.append(top(lg, top_k))
            if i + 1 < n_gen:
                lg = model.step(st, steps[-1][0][0])
        print(json.dumps({"prompt_ids": toks, "steps": steps}), flush=True)


def against(model: HybridModel, path: str, n_gen: int):
    """This forward on llama_greedy_dump's tokens; differences at llama.cpp's top-K ids."""
    worst, n_steps, n_top1_diff, per_prompt = 0.0, 0, 0, []
    for line in open(path):
        rec = json.loads(line)
        toks, steps = rec["prompt_ids"], rec["steps"]
        st = model.new_state()
        teacher = n_gen == 0
        assert len(steps) == (len(toks) if teacher else n_gen), "N_GEN differs from the dump's"
        logits = []
        for t in toks:
            lg = model.step(st, t)
            if teacher:
                logits.append(lg)
        if not teacher:
            logits.append(lg)
            for s in steps[:-1]:
                logits.append(model.step(st, s[0][0]))
        pmax, flips = 0.0, []
        for i, (s, lg) in enumerate(zip(steps, logits)):
            d = max(abs(lg[t] - v) for t, v in s)
            pmax = max(pmax, d)
            n_steps += 1
            mine = int(np.argmax(lg))
            if mine != s[0][0]:
                n_top1_diff += 1
                flips.append({"step": i, "llama": s[0][0], "numpy": mine,
                              "llama_margin": round(s[0][1] - s[1][1], 5) if len(s) > 1 else None})
        worst = max(worst, pmax)
        per_prompt.append(pmax)
        print(json.dumps({"n_prompt": len(toks), "n_steps": len(steps), "max_abs_diff": round(pmax, 6),
                          "top1_differs": flips}), flush=True)
    summary = {"arch": model.arch, "f16": model.f16, "q8act": model.q8act, "prompts": len(per_prompt), "steps": n_steps,
               "max_abs_diff": round(worst, 6), "median_prompt_max": round(float(np.median(per_prompt)), 6),
               "top1_differs": n_top1_diff}
    if model.router_gaps:
        summary["min_router_gap"] = round(min(model.router_gaps), 4)
    print(json.dumps(summary), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("n_gen", nargs="?", type=int)
    ap.add_argument("top_k", nargs="?", type=int, default=3)
    ap.add_argument("--against", metavar="LLAMA.jsonl")
    ap.add_argument("--f16", action="store_true", help="ggml's F16 roundings of K, V, q and the softmax")
    ap.add_argument("--q8act", action="store_true", help="activations quantized to Q8_0 before a Q8_0 weight")
    args = ap.parse_args()
    model = HybridModel(args.model, f16=args.f16, q8act=args.q8act)
    if args.n_gen is None:
        ap.error("N_GEN is required")
    if args.against:
        against(model, args.against, args.n_gen)
    else:
        run(model, args.n_gen, args.top_k)
    return 0


if __name__ == "__main__":
    sys.exit(main())
