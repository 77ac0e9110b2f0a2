#!/usr/bin/env python3
"""Random-weight GGUF models of the architectures spate runs without a real
model here (issue 14), written with the PyPI `gguf` package.

Each model is small (256 wide, 6 layers, GQA 4/2) and carries the default
model's vocabulary (SmolLM2's byte-level BPE, copied from its GGUF), so any
token sequence can be fed. Weights are seeded: the same gguf and numpy
versions (tests/requirements.txt pins them) write the same bytes; the fixture
records each file's SHA-256 and this script refuses to go on when a file
differs from it.

  qwen3   QK-norm, no QKV bias, NeoX RoPE
  gemma3  QK-norm, norms after attention and FFN, embedding scale, GELU-tanh
          FFN, sliding window of 16 positions on layers 0-4 (layer 5 global)
          with RoPE base 10k there (no final logit soft-capping: llama.cpp's
          gemma3 graph has none; test_reference_random.cpp checks spate's on its own)
  phi3    fused QKV and fused gate|up, LongRoPE factors (short and long) with
          an original context of 32 positions and an attention factor 1.19
          (llama.cpp uses the long factors when its context exceeds 32)

and mixture-of-experts models (issue 35), keys and tensors as llama.cpp's
convert_hf_to_gguf writes them (F32 router `ffn_gate_inp` [n_embd -> n_expert],
3-D `ffn_{gate,up,down}_exps`, no dense FFN tensors):

  qwen3moe        Qwen3-MoE: qwen3 attention, 16 experts, 4 used, expert FFN 128
                  (`expert_feed_forward_length`; `feed_forward_length` 512 is
                  the dense size the converter copies and llama.cpp ignores), Q8_0
  qwen3moe-mixed  the same shape with expert FFN 256 and a Q4_K_M-like mix of
                  weight types per tensor and layer (Q4_K, Q6_K, Q4_0, Q4_1,
                  Q5_0, Q5_1, Q8_0, F16, BF16)
  llama-moe       Mixtral-style llama: no QK-norm, normal (not NeoX) RoPE, 8
                  experts, 2 used, expert FFN = `feed_forward_length` 256, no
                  key/value length keys (head size from n_embd / n_head),
                  experts Q4_0 (gate, up) and Q8_0 (down)

and gpt-oss (issue 36): 8 experts, 4 used, expert FFN 128 in MXFP4 with
biases, Q/K/V/O biases, attention sinks, a sliding window of 16 positions on
the even layers, YaRN (factor 32 over 4096 positions), the pre-FFN norm named
post_attention_norm.

A model's name keys the fixture (its `name`, or its `arch` where the two are
equal) and its file, random-NAME.gguf.

and gpt-oss-q (issue 54): 8 experts, 2 used, no rope scaling keys, window 16, as
llama.cpp's `llama-quantize ... MXFP4_MOE` writes it from gpt-oss-f32 (--f32).

and, written only with --hybrid (issue 56, no fixture entry yet), the hybrid
Gated DeltaNet models as llama.cpp 0.3.36 reads them (HYBRID_MODELS below;
tests/reference/hybrid_numpy.py is their float64 forward):

  qwen35          Qwen3.5 dense: 8 layers (3 DeltaNet : 1 full attention),
                  attention 4/2 heads of 64 with a query gate, QK-norm, IMRoPE
                  over 16 dims (sections 3,3,2,0), DeltaNet 2 k-heads, 4
                  v-heads of 32, conv kernel 4, separate ssm_beta/ssm_alpha,
                  dense SwiGLU FFN 512
  qwen35moe       the same with 8 routed experts (2 used, FFN 128) and a
                  gated shared expert (FFN 256), routed by a code as the MoE
                  models above
  qwen3next       Qwen3-Next: as qwen35moe but NeoX RoPE over 16 dims, the
                  fused ssm_ba projection and v-head h reading k-head h / 2
                  (interleaved, where Qwen3.5 tiles: h % 2)
  NAME-q8         each of them with every 2-D matrix Q8_0 but the conv kernel
                  and the router, as llama-quantize leaves them (ssm_a,
                  ssm_dt, norms and the shared-expert gate are 1-D: F32)

Usage: make_random_models.py --out-dir DIR [--check FIXTURE.json] [--f32] [--hybrid] [--only NAME...]
Prints one line per model: its name and path.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import gguf

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kquants  # noqa: E402

DEFAULT_VOCAB_MODEL = os.path.expanduser("~/.cache/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf")
N_EMBD, N_LAYER, N_HEAD, N_HEAD_KV, HEAD_DIM, N_FF = 256, 6, 4, 2, 64, 512
GEMMA_WINDOW = 16
PHI3_ORIG_CTX = 32


def vocab_fields(path: str) -> dict:
    """The tokenizer metadata of a GGUF: tokens, token types, merges, special ids."""
    r = gguf.GGUFReader(path)

    def strings(key):
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    def ints(key):
        f = r.fields[key]
        return [int(f.parts[i][0]) for i in f.data]

    def scalar(key):
        f = r.fields.get(key)
        return None if f is None else int(f.parts[f.data[0]][0])

    return {"tokens": strings("tokenizer.ggml.tokens"), "types": ints("tokenizer.ggml.token_type"),
            "merges": strings("tokenizer.ggml.merges"), "pre": bytes(r.fields["tokenizer.ggml.pre"].parts[-1]).decode(),
            "bos": scalar("tokenizer.ggml.bos_token_id"), "eos": scalar("tokenizer.ggml.eos_token_id")}


def matrix(rng, n_out: int, n_in: int) -> np.ndarray:
    return (rng.standard_normal((n_out, n_in)) / np.sqrt(n_in)).astype(np.float32)


def norm_weight(rng, n: int) -> np.ndarray:
    return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)


def add_matrix(w: gguf.GGUFWriter, name: str, m: np.ndarray):
    q = gguf.quants.quantize(m, gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)


def add_vocab(w: gguf.GGUFWriter, vocab: dict):
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(vocab["pre"])
    w.add_token_list(vocab["tokens"])
    w.add_token_types(vocab["types"])
    w.add_token_merges(vocab["merges"])
    w.add_bos_token_id(vocab["bos"])
    w.add_eos_token_id(vocab["eos"])
    w.add_add_bos_token(False)


def write_model(arch: str, path: Path, vocab: dict, seed: int):
    rng = np.random.default_rng(seed)
    n_vocab = len(vocab["tokens"])
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"spate random model {seed}")  # not the architecture: llama.cpp keys vocabulary quirks on names like "phi3"
    w.add_context_length(2048)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1e6)
    if arch == "gemma3":
        w.add_sliding_window(GEMMA_WINDOW)
    if arch == "phi3":
        w.add_rope_dimension_count(HEAD_DIM)
        w.add_rope_scaling_orig_ctx_len(PHI3_ORIG_CTX)
        w.add_rope_scaling_attn_factors(1.19)
    add_vocab(w, vocab)

    add_matrix(w, "token_embd.weight", (rng.standard_normal((n_vocab, N_EMBD)) * 0.5).astype(np.float32))
    w.add_tensor("output_norm.weight", norm_weight(rng, N_EMBD))
    for l in range(N_LAYER):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", norm_weight(rng, N_EMBD))
        q, k, v = (matrix(rng, N_HEAD * HEAD_DIM, N_EMBD), matrix(rng, N_HEAD_KV * HEAD_DIM, N_EMBD),
                   matrix(rng, N_HEAD_KV * HEAD_DIM, N_EMBD))
        if arch == "phi3":
            add_matrix(w, p + "attn_qkv.weight", np.concatenate([q, k, v]))
        else:
            add_matrix(w, p + "attn_q.weight", q)
            add_matrix(w, p + "attn_k.weight", k)
            add_matrix(w, p + "attn_v.weight", v)
        add_matrix(w, p + "attn_output.weight", matrix(rng, N_EMBD, N_HEAD * HEAD_DIM))
        if arch != "phi3":
            w.add_tensor(p + "attn_q_norm.weight", norm_weight(rng, HEAD_DIM))
            w.add_tensor(p + "attn_k_norm.weight", norm_weight(rng, HEAD_DIM))
        w.add_tensor(p + "ffn_norm.weight", norm_weight(rng, N_EMBD))
        gate, up = matrix(rng, N_FF, N_EMBD), matrix(rng, N_FF, N_EMBD)
        if arch == "phi3":
            add_matrix(w, p + "ffn_up.weight", np.concatenate([gate, up]))
        else:
            add_matrix(w, p + "ffn_gate.weight", gate)
            add_matrix(w, p + "ffn_up.weight", up)
        add_matrix(w, p + "ffn_down.weight", matrix(rng, N_EMBD, N_FF))
        if arch == "gemma3":
            w.add_tensor(p + "post_attention_norm.weight", norm_weight(rng, N_EMBD))
            w.add_tensor(p + "post_ffw_norm.weight", norm_weight(rng, N_EMBD))
    # An output projection of its own: tied to the embeddings, a random model's
    # logits mostly repeat the input token.
    add_matrix(w, "output.weight", matrix(rng, n_vocab, N_EMBD) * 4.0)
    if arch == "phi3":
        w.add_tensor("rope_factors_short.weight", (1.0 + rng.random(HEAD_DIM // 2)).astype(np.float32))
        w.add_tensor("rope_factors_long.weight", (1.0 + 8.0 * rng.random(HEAD_DIM // 2)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

Q = gguf.GGMLQuantizationType


@dataclass(frozen=True)
class MoeModel:
    """A mixture-of-experts model: its GGUF architecture, seed and expert shape.
    types: weight role -> types by layer (cycled; embd and output take the
    first); roles not listed are Q8_0."""
    arch: str
    seed: int
    n_expert: int
    n_expert_used: int
    n_ff_exp: int
    types: dict = field(default_factory=dict)

    def type_of(self, role: str, layer: int = 0):
        t = self.types.get(role, [Q.Q8_0])
        return t[layer % len(t)]


MOE_MODELS = {
    "qwen3moe": MoeModel("qwen3moe", 1006, n_expert=16, n_expert_used=4, n_ff_exp=128),
    "qwen3moe-mixed": MoeModel(
        "qwen3moe", 1007, n_expert=16, n_expert_used=4, n_ff_exp=256,
        types={"embd": [Q.Q4_K], "output": [Q.Q6_K],
               "attn_q": [Q.Q4_K, Q.Q5_0], "attn_k": [Q.Q4_K, Q.Q4_1], "attn_v": [Q.Q6_K, Q.Q8_0],
               "attn_output": [Q.Q4_K, Q.F16],
               "gate_exps": [Q.Q4_K, Q.Q4_0, Q.Q5_1, Q.BF16, Q.Q4_K, Q.Q4_1],
               "up_exps": [Q.Q4_K, Q.Q5_0, Q.Q8_0, Q.Q4_K, Q.F16, Q.Q4_K],
               "down_exps": [Q.Q6_K, Q.Q4_K, Q.Q4_0, Q.Q8_0, Q.Q6_K, Q.BF16]}),
    "llama-moe": MoeModel("llama", 1008, n_expert=8, n_expert_used=2, n_ff_exp=256,
                          types={"gate_exps": [Q.Q4_0], "up_exps": [Q.Q4_0]}),
}


def add_typed(w: gguf.GGUFWriter, name: str, m: np.ndarray, qtype):
    """m (rows along the last axis) stored as qtype."""
    if qtype == Q.F32:
        w.add_tensor(name, m.astype(np.float32))
        return
    if qtype == Q.Q4_K:
        q = kquants.quantize_q4_k(m)
    elif qtype == Q.Q6_K:
        q = kquants.quantize_q6_k(m)
    else:
        q = gguf.quants.quantize(m, qtype)
    if qtype == Q.F16:
        w.add_tensor(name, q)
    else:
        w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qtype)


# Routing. Two engines' hidden states differ by ~1e-3 relative (llama.cpp's own
# one-batch and token-by-token paths do), and a random router over 16 experts
# leaves some of 384 top-k choices (64 tokens x 6 layers) within 1e-3 of a tie:
# the engines would pick different experts there, and the logits could not be
# compared. So the choice is made robust by construction: the last n_expert
# dimensions of the residual stream (the routing dimensions) carry a code of the
# token, +-ROUTE_CODE with exactly n_expert_used positive entries, that nothing
# writes to (the rows of attn_output and ffn_down_exps for them are zero, exactly
# so in every weight type). Each layer's router reads the code through its own
# permutation of the experts (weight 1), which decides the top-k with a gap of
# several units, plus ROUTE_CONTEXT times a random matrix over the other
# dimensions, which with the RMS norm makes the experts' weights depend on the
# context. The top-k is thus a function of the token and the layer; llama.cpp's
# router logits are checked for that gap by make_random_fixtures.py.
ROUTE_CODE, ROUTE_CONTEXT = 2.0, 0.2


def routing_code(rng, n_vocab: int, m: "MoeModel") -> np.ndarray:
    """Per token, +-ROUTE_CODE over the n_expert routing dimensions, n_expert_used of them positive."""
    order = np.argsort(rng.random((n_vocab, m.n_expert)), axis=1)
    code = np.full((n_vocab, m.n_expert), -ROUTE_CODE, np.float32)
    np.put_along_axis(code, order[:, :m.n_expert_used], ROUTE_CODE, axis=1)
    return code


def router(rng, m: "MoeModel") -> np.ndarray:
    """[n_expert, n_embd]: a permutation of the routing dimensions plus a weak random part over the others."""
    r = ROUTE_CONTEXT * matrix(rng, m.n_expert, N_EMBD)
    r[:, N_EMBD - m.n_expert:] = 0.0
    r[np.arange(m.n_expert), N_EMBD - m.n_expert + rng.permutation(m.n_expert)] = 1.0
    return r


def no_routing_writes(w: np.ndarray, m: "MoeModel") -> np.ndarray:
    """w (rows = residual dimensions, on axis -2) with the routing dimensions' rows zero."""
    w[..., N_EMBD - m.n_expert:, :] = 0.0
    return w


def experts(rng, n_expert: int, n_out: int, n_in: int) -> np.ndarray:
    """n_expert matrices n_in -> n_out: numpy [n_expert, n_out, n_in], GGML ne {n_in, n_out, n_expert}."""
    return (rng.standard_normal((n_expert, n_out, n_in)) / np.sqrt(n_in)).astype(np.float32)


def write_moe_model(m: MoeModel, path: Path, vocab: dict):
    rng = np.random.default_rng(m.seed)
    n_vocab = len(vocab["tokens"])
    qwen = m.arch == "qwen3moe"
    w = gguf.GGUFWriter(str(path), m.arch)
    w.add_name(f"spate random model {m.seed}")
    if not qwen:
        w.add_vocab_size(n_vocab)
    w.add_context_length(2048)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    # Qwen3-MoE's converter copies the config's dense intermediate_size here and the
    # experts' size to expert_feed_forward_length; Mixtral's experts take this one.
    w.add_feed_forward_length(N_FF if qwen else m.n_ff_exp)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    if qwen:
        w.add_key_length(HEAD_DIM)
        w.add_value_length(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1e6)
    w.add_expert_count(m.n_expert)
    w.add_expert_used_count(m.n_expert_used)
    if qwen:
        w.add_expert_feed_forward_length(m.n_ff_exp)
    else:
        w.add_rope_dimension_count(HEAD_DIM)
    add_vocab(w, vocab)

    embd = (rng.standard_normal((n_vocab, N_EMBD)) * 0.5).astype(np.float32)
    embd[:, N_EMBD - m.n_expert:] = routing_code(rng, n_vocab, m)
    add_typed(w, "token_embd.weight", embd, m.type_of("embd"))
    w.add_tensor("output_norm.weight", norm_weight(rng, N_EMBD))
    for l in range(N_LAYER):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", norm_weight(rng, N_EMBD))
        add_typed(w, p + "attn_q.weight", matrix(rng, N_HEAD * HEAD_DIM, N_EMBD), m.type_of("attn_q", l))
        add_typed(w, p + "attn_k.weight", matrix(rng, N_HEAD_KV * HEAD_DIM, N_EMBD), m.type_of("attn_k", l))
        add_typed(w, p + "attn_v.weight", matrix(rng, N_HEAD_KV * HEAD_DIM, N_EMBD), m.type_of("attn_v", l))
        add_typed(w, p + "attn_output.weight", no_routing_writes(matrix(rng, N_EMBD, N_HEAD * HEAD_DIM), m),
                  m.type_of("attn_output", l))
        if qwen:
            w.add_tensor(p + "attn_q_norm.weight", norm_weight(rng, HEAD_DIM))
            w.add_tensor(p + "attn_k_norm.weight", norm_weight(rng, HEAD_DIM))
        w.add_tensor(p + "ffn_norm.weight", norm_weight(rng, N_EMBD))
        # The router stays F32, as the converter and llama-quantize leave it.
        w.add_tensor(p + "ffn_gate_inp.weight", router(rng, m))
        add_typed(w, p + "ffn_gate_exps.weight", experts(rng, m.n_expert, m.n_ff_exp, N_EMBD), m.type_of("gate_exps", l))
        add_typed(w, p + "ffn_up_exps.weight", experts(rng, m.n_expert, m.n_ff_exp, N_EMBD), m.type_of("up_exps", l))
        add_typed(w, p + "ffn_down_exps.weight", no_routing_writes(experts(rng, m.n_expert, N_EMBD, m.n_ff_exp), m),
                  m.type_of("down_exps", l))
    add_typed(w, "output.weight", matrix(rng, n_vocab, N_EMBD) * 4.0, m.type_of("output"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


GPT_OSS = MoeModel("gpt-oss", 1009, n_expert=8, n_expert_used=4, n_ff_exp=128,
                   types={"gate_exps": [Q.MXFP4], "up_exps": [Q.MXFP4], "down_exps": [Q.MXFP4]})
GPT_OSS_WINDOW, GPT_OSS_YARN, GPT_OSS_ORIG_CTX = 16, 32.0, 4096


def bias(rng, *shape, scale=0.1) -> np.ndarray:
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def add_gpt_oss_keys(w: gguf.GGUFWriter, n_ctx: int, m: MoeModel = GPT_OSS, yarn: bool = True):
    """The hyper-parameters of a small gpt-oss (GPT_OSS), from the context length on;
    yarn=False: no rope scaling key at all."""
    w.add_context_length(n_ctx)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(m.n_ff_exp)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(150000.0)
    if yarn:
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(GPT_OSS_YARN)
        w.add_rope_scaling_orig_ctx_len(GPT_OSS_ORIG_CTX)
    w.add_expert_count(m.n_expert)
    w.add_expert_used_count(m.n_expert_used)
    w.add_sliding_window(GPT_OSS_WINDOW)
    w.add_expert_feed_forward_length(m.n_ff_exp)


def write_gpt_oss_model(path: Path, vocab: dict, m: MoeModel = GPT_OSS, yarn: bool = True, file_type=None):
    """gpt-oss as llama.cpp's converter writes it: Q/K/V/O biases, attention
    sinks, sliding window on the even layers, YaRN, MXFP4 experts with biases,
    the pre-FFN norm named post_attention_norm. Routing as write_moe_model's,
    the router bias, the down biases and the output bias leaving it intact.
    m, yarn: another shape and weight types, no rope scaling keys; file_type:
    general.file_type and general.quantization_version (2), as llama-quantize writes them."""
    rng = np.random.default_rng(m.seed)
    n_vocab = len(vocab["tokens"])
    w = gguf.GGUFWriter(str(path), m.arch)
    w.add_name(f"spate random model {m.seed}")
    add_gpt_oss_keys(w, 2048, m, yarn)
    if file_type is not None:
        w.add_file_type(file_type)
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    add_vocab(w, vocab)

    embd = (rng.standard_normal((n_vocab, N_EMBD)) * 0.5).astype(np.float32)
    embd[:, N_EMBD - m.n_expert:] = routing_code(rng, n_vocab, m)
    add_typed(w, "token_embd.weight", embd, m.type_of("embd"))
    w.add_tensor("output_norm.weight", norm_weight(rng, N_EMBD))
    routing_rows = slice(N_EMBD - m.n_expert, N_EMBD)
    for l in range(N_LAYER):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", norm_weight(rng, N_EMBD))
        add_typed(w, p + "attn_q.weight", matrix(rng, N_HEAD * HEAD_DIM, N_EMBD), m.type_of("attn_q", l))
        w.add_tensor(p + "attn_q.bias", bias(rng, N_HEAD * HEAD_DIM))
        add_typed(w, p + "attn_k.weight", matrix(rng, N_HEAD_KV * HEAD_DIM, N_EMBD), m.type_of("attn_k", l))
        w.add_tensor(p + "attn_k.bias", bias(rng, N_HEAD_KV * HEAD_DIM))
        add_typed(w, p + "attn_v.weight", matrix(rng, N_HEAD_KV * HEAD_DIM, N_EMBD), m.type_of("attn_v", l))
        w.add_tensor(p + "attn_v.bias", bias(rng, N_HEAD_KV * HEAD_DIM))
        add_typed(w, p + "attn_output.weight", no_routing_writes(matrix(rng, N_EMBD, N_HEAD * HEAD_DIM), m),
                  m.type_of("attn_output", l))
        o_bias = bias(rng, N_EMBD)
        o_bias[routing_rows] = 0.0
        w.add_tensor(p + "attn_output.bias", o_bias)
        w.add_tensor(p + "attn_sinks.weight", bias(rng, N_HEAD, scale=1.0))
        w.add_tensor(p + "post_attention_norm.weight", norm_weight(rng, N_EMBD))
        w.add_tensor(p + "ffn_gate_inp.weight", router(rng, m))
        w.add_tensor(p + "ffn_gate_inp.bias", bias(rng, m.n_expert))
        add_typed(w, p + "ffn_gate_exps.weight", experts(rng, m.n_expert, m.n_ff_exp, N_EMBD), m.type_of("gate_exps", l))
        w.add_tensor(p + "ffn_gate_exps.bias", bias(rng, m.n_expert, m.n_ff_exp))
        add_typed(w, p + "ffn_up_exps.weight", experts(rng, m.n_expert, m.n_ff_exp, N_EMBD), m.type_of("up_exps", l))
        w.add_tensor(p + "ffn_up_exps.bias", bias(rng, m.n_expert, m.n_ff_exp))
        add_typed(w, p + "ffn_down_exps.weight", no_routing_writes(experts(rng, m.n_expert, N_EMBD, m.n_ff_exp), m),
                  m.type_of("down_exps", l))
        down_bias = bias(rng, m.n_expert, N_EMBD)
        down_bias[:, routing_rows] = 0.0
        w.add_tensor(p + "ffn_down_exps.bias", down_bias)
    add_typed(w, "output.weight", matrix(rng, n_vocab, N_EMBD) * 4.0, m.type_of("output"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# gpt-oss as issue 54 found it: 8 experts, 2 used, no rope scaling keys, window 16,
# written in F32 (gpt-oss-f32, the input of llama.cpp's `llama-quantize ... MXFP4_MOE`)
# and as that quantizer writes it (gpt-oss-q: experts MXFP4, every other matrix
# Q8_0, router, norms, sinks and biases F32, general.file_type 38): ggml's
# MXFP4 and Q8_0 encoders are the same algorithms as gguf's (ggml-quants.c
# quantize_row_mxfp4_ref / quantize_row_q8_0_ref), and the tensors are byte for
# byte llama-quantize's (0.3.36, checked 2026-12-07: tests/reference/README.md).
_ALL_ROLES = ("embd", "output", "attn_q", "attn_k", "attn_v", "attn_output", "gate_exps", "up_exps", "down_exps")
GPT_OSS_F32 = MoeModel("gpt-oss", 1010, n_expert=8, n_expert_used=2, n_ff_exp=128,
                       types={r: [Q.F32] for r in _ALL_ROLES})
GPT_OSS_Q = MoeModel("gpt-oss", 1010, n_expert=8, n_expert_used=2, n_ff_exp=128,
                     types={"gate_exps": [Q.MXFP4], "up_exps": [Q.MXFP4], "down_exps": [Q.MXFP4]})
LLAMA_FTYPE_MOSTLY_MXFP4_MOE = 38

ARCHS = {"qwen3": 1003, "gemma3": 1004, "phi3": 1005}  # dense architecture -> seed
# name -> (GGUF architecture, writer); every model the fixture has
MODELS = {**{a: (a, lambda p, v, a=a, s=s: write_model(a, p, v, s)) for a, s in ARCHS.items()},
          **{n: (m.arch, lambda p, v, m=m: write_moe_model(m, p, v)) for n, m in MOE_MODELS.items()},
          "gpt-oss": ("gpt-oss", write_gpt_oss_model),
          # what llama.cpp's `llama-quantize random-gpt-oss-f32.gguf OUT MXFP4_MOE` writes (its tensors byte for byte)
          "gpt-oss-q": ("gpt-oss", lambda p, v: write_gpt_oss_model(p, v, GPT_OSS_Q, yarn=False,
                                                                   file_type=LLAMA_FTYPE_MOSTLY_MXFP4_MOE))}
# Written only with --f32 (126 MB): gpt-oss-f32, the input of that quantizer.
F32_MODELS = {"gpt-oss-f32": ("gpt-oss", lambda p, v: write_gpt_oss_model(p, v, GPT_OSS_F32, yarn=False))}



# Hybrid models (issue 55): Gated DeltaNet ("linear attention") layers with a
# gated full-attention layer every 4th, as llama.cpp 0.3.36's qwen35,
# qwen35moe and qwen3next graphs read them (src/models/qwen35.cpp,
# qwen35moe.cpp, qwen3next.cpp). Tensors and keys as its converter writes them
# (conversion/qwen.py): a recurrent layer has attn_qkv (q of all k-heads, then
# k, then v), attn_gate (z), ssm_conv1d {kernel, channels}, ssm_dt.bias,
# ssm_a (= -exp(A_log)), ssm_beta + ssm_alpha (Qwen3.5) or ssm_ba (Qwen3-Next:
# per k-head, its v-heads' beta then their alpha), ssm_norm, ssm_out; an
# attention layer has attn_q (per head the query then its gate), attn_k,
# attn_v, attn_q_norm, attn_k_norm, attn_output; every layer attn_norm and
# post_attention_norm (the pre-FFN norm). No MTP (nextn) layers.
@dataclass(frozen=True)
class HybridModel:
    arch: str
    seed: int
    qtype: object = Q.F32          # every 2-D matrix; the rest F32
    n_layer: int = 8               # layers 3 and 7 full attention (interval 4)
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 64
    n_rot: int = 16                # rope.dimension_count: head_dim * 0.25, as the converter writes it
    sections: tuple = (3, 3, 2, 0)  # qwen35*: IMRoPE sections, sum n_rot / 2 (Qwen3.5's are 11,11,10,0 of 64)
    d_state: int = 32              # ssm.state_size: head dim of k and v (llama.cpp requires them equal)
    n_k_heads: int = 2             # ssm.group_count
    n_v_heads: int = 4             # ssm.time_step_rank; ssm.inner_size = n_v_heads * d_state
    d_conv: int = 4
    n_ff: int = 512                # dense FFN (qwen35)
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    n_ff_shexp: int = 0


HYBRID_BASE = {
    "qwen35": HybridModel("qwen35", 1011),
    "qwen35moe": HybridModel("qwen35moe", 1012, n_expert=8, n_expert_used=2, n_ff_exp=128, n_ff_shexp=256),
    "qwen3next": HybridModel("qwen3next", 1013, sections=(), n_expert=8, n_expert_used=2, n_ff_exp=128,
                             n_ff_shexp=256),
}
HYBRID_MODELS = {**HYBRID_BASE,
                 **{f"{n}-q8": HybridModel(**{**m.__dict__, "qtype": Q.Q8_0}) for n, m in HYBRID_BASE.items()}}


def write_hybrid_model(m: HybridModel, path: Path, vocab: dict):
    rng = np.random.default_rng(m.seed)
    n_vocab = len(vocab["tokens"])
    moe = m.n_expert > 0
    next_ = m.arch == "qwen3next"
    key_dim, value_dim = m.n_k_heads * m.d_state, m.n_v_heads * m.d_state
    w = gguf.GGUFWriter(str(path), m.arch)
    w.add_name(f"spate random model {m.seed}")
    w.add_context_length(2048)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(m.n_layer)
    w.add_feed_forward_length(m.n_ff)
    w.add_head_count(m.n_head)
    w.add_head_count_kv(m.n_head_kv)
    w.add_key_length(m.head_dim)
    w.add_value_length(m.head_dim)
    w.add_rope_dimension_count(m.n_rot)
    if m.sections:
        w.add_rope_dimension_sections(list(m.sections))
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1e7)
    w.add_ssm_conv_kernel(m.d_conv)
    w.add_ssm_state_size(m.d_state)
    w.add_ssm_group_count(m.n_k_heads)
    w.add_ssm_time_step_rank(m.n_v_heads)
    w.add_ssm_inner_size(value_dim)
    w.add_full_attention_interval(4)
    if moe:
        w.add_expert_count(m.n_expert)
        w.add_expert_used_count(m.n_expert_used)
        w.add_expert_feed_forward_length(m.n_ff_exp)
        w.add_expert_shared_feed_forward_length(m.n_ff_shexp)
    if m.qtype != Q.F32:
        w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    add_vocab(w, vocab)

    def mat(name, a):
        add_typed(w, name, a, m.qtype)

    # routing as write_moe_model's: a code of the token in the last n_expert
    # residual dimensions, which no layer writes to (attn_output, ssm_out and both
    # down projections have zero rows there)
    route = MoeModel(m.arch, m.seed, m.n_expert, m.n_expert_used, m.n_ff_exp) if moe else None
    keep = (lambda a: no_routing_writes(a, route)) if moe else (lambda a: a)
    embd = (rng.standard_normal((n_vocab, N_EMBD)) * 0.5).astype(np.float32)
    if moe:
        embd[:, N_EMBD - m.n_expert:] = routing_code(rng, n_vocab, route)
    mat("token_embd.weight", embd)
    w.add_tensor("output_norm.weight", norm_weight(rng, N_EMBD))
    for l in range(m.n_layer):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", norm_weight(rng, N_EMBD))
        if (l + 1) % 4 == 0:  # full attention: the query projection carries each head's output gate
            mat(p + "attn_q.weight", matrix(rng, m.n_head * m.head_dim * 2, N_EMBD))
            mat(p + "attn_k.weight", matrix(rng, m.n_head_kv * m.head_dim, N_EMBD))
            mat(p + "attn_v.weight", matrix(rng, m.n_head_kv * m.head_dim, N_EMBD))
            w.add_tensor(p + "attn_q_norm.weight", norm_weight(rng, m.head_dim))
            w.add_tensor(p + "attn_k_norm.weight", norm_weight(rng, m.head_dim))
            mat(p + "attn_output.weight", keep(matrix(rng, N_EMBD, m.n_head * m.head_dim)))
        else:  # Gated DeltaNet
            mat(p + "attn_qkv.weight", matrix(rng, 2 * key_dim + value_dim, N_EMBD))
            mat(p + "attn_gate.weight", matrix(rng, value_dim, N_EMBD))
            # {d_conv, channels} in ggml order: numpy [channels, d_conv]
            w.add_tensor(p + "ssm_conv1d.weight",
                         (0.5 * rng.standard_normal((2 * key_dim + value_dim, m.d_conv))).astype(np.float32))
            w.add_tensor(p + "ssm_dt.bias", (0.5 * rng.standard_normal(m.n_v_heads)).astype(np.float32))
            # A = exp(A_log) from 0.02 to 1: per-token decays exp(g) from ~0.99 to ~0.3
            w.add_tensor(p + "ssm_a", (-np.exp(rng.uniform(np.log(0.02), 0.0, m.n_v_heads))).astype(np.float32))
            if next_:
                mat(p + "ssm_ba.weight", matrix(rng, 2 * m.n_v_heads, N_EMBD))
            else:
                mat(p + "ssm_beta.weight", matrix(rng, m.n_v_heads, N_EMBD))
                mat(p + "ssm_alpha.weight", matrix(rng, m.n_v_heads, N_EMBD))
            w.add_tensor(p + "ssm_norm.weight", norm_weight(rng, m.d_state))
            mat(p + "ssm_out.weight", keep(matrix(rng, N_EMBD, value_dim)))
        w.add_tensor(p + "post_attention_norm.weight", norm_weight(rng, N_EMBD))
        if moe:
            w.add_tensor(p + "ffn_gate_inp.weight", router(rng, route))
            mat(p + "ffn_gate_exps.weight", experts(rng, m.n_expert, m.n_ff_exp, N_EMBD))
            mat(p + "ffn_up_exps.weight", experts(rng, m.n_expert, m.n_ff_exp, N_EMBD))
            mat(p + "ffn_down_exps.weight", keep(experts(rng, m.n_expert, N_EMBD, m.n_ff_exp)))
            w.add_tensor(p + "ffn_gate_inp_shexp.weight", matrix(rng, 1, N_EMBD)[0])
            mat(p + "ffn_gate_shexp.weight", matrix(rng, m.n_ff_shexp, N_EMBD))
            mat(p + "ffn_up_shexp.weight", matrix(rng, m.n_ff_shexp, N_EMBD))
            mat(p + "ffn_down_shexp.weight", keep(matrix(rng, N_EMBD, m.n_ff_shexp)))
        else:
            mat(p + "ffn_gate.weight", matrix(rng, m.n_ff, N_EMBD))
            mat(p + "ffn_up.weight", matrix(rng, m.n_ff, N_EMBD))
            mat(p + "ffn_down.weight", matrix(rng, N_EMBD, m.n_ff))
    mat("output.weight", matrix(rng, n_vocab, N_EMBD) * 4.0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


HYBRID = {n: (m.arch, lambda p, v, m=m: write_hybrid_model(m, p, v)) for n, m in HYBRID_MODELS.items()}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--vocab-model", default=os.environ.get("SPATE_MODEL", DEFAULT_VOCAB_MODEL))
    ap.add_argument("--check", help="fixture JSON whose per-model sha256 the files must match")
    ap.add_argument("--f32", action="store_true", help="also write " + ", ".join(F32_MODELS))
    ap.add_argument("--hybrid", action="store_true", help="also write " + ", ".join(HYBRID))
    ap.add_argument("--only", nargs="+", metavar="NAME", help="write only these models")
    args = ap.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    expected = {}
    if args.check:
        expected = {m.get("name", m["arch"]): m["sha256"] for m in json.loads(Path(args.check).read_text())["models"]}
    vocab = vocab_fields(args.vocab_model)
    models = {**MODELS, **(F32_MODELS if args.f32 else {}), **(HYBRID if args.hybrid else {})}
    if args.only:
        unknown = set(args.only) - set(models)
        if unknown:
            print(f"unknown model(s) {sorted(unknown)}; known: {', '.join(models)}", file=sys.stderr)
            return 1
        models = {n: models[n] for n in args.only}
    for name, (arch, write) in models.items():
        path = out / f"random-{name}.gguf"
        if not (path.exists() and expected.get(name) == sha256(path)):
            write(path, vocab)
        digest = sha256(path)
        if name in expected and expected[name] != digest:
            print(f"{path}: sha256 {digest} differs from the fixture's {expected[name]} "
                  f"(another gguf/numpy version?); the reference logits do not apply", file=sys.stderr)
            return 1
        print(name, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
