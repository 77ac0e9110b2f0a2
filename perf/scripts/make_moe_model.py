#!/usr/bin/env python3
"""Writes a random-weight mixture-of-experts GGUF, quantized blocks written directly, for the
mixture-of-experts benchmarks (perf/scripts/bench_moe.sh): a `qwen3moe` with Qwen3-30B-A3B's
shape (issue 35, the default), or with --arch gpt-oss a `gpt-oss` with gpt-oss-20b's shape and
MXFP4 experts. The files are big (12-19 GB): never in the repository, never in CI.

Usage: perf/scripts/make_moe_model.py [--arch qwen3moe|gpt-oss] [--shape SHAPE] [--mix MIX|all]
         [--out-dir DIR] [--vocab qwen|generated] [--vocab-from GGUF] [--chat-template FILE]
         [--seed 0] [--force]

qwen3moe shapes (the hyper-parameters of Qwen/Qwen3-30B-A3B's config.json, as
convert_hf_to_gguf.py writes them for llama.cpp):
  30b-a3b  48 layers, n_embd 2048, 32 query / 4 KV heads of 128, 128 experts, 8 used per
           token, expert FFN 768, (dense) FFN 6144, context 40960, rope base 1e6,
           RMS eps 1e-6, QK-norm, untied output; vocabulary 151936
  smoke    the same layout at toy size for quick tries: 2 layers, n_embd 512, 4 / 2 heads
           of 128, 16 experts, 4 used, expert FFN 256; the same vocabulary
qwen3moe mixes (the weight types of llama-quantize, llama.cpp 0.3.36 src/llama-quant.cpp):
  q4_0     every 2-D and 3-D weight Q4_0, output and token_embd too (`llama-quantize --pure`)
  q4_k_m   Q4_K_M's rules for this model (128 experts, so none of the 8-expert cases):
           output.weight Q6_K; attn_v and ffn_down_exps Q6_K in the layers where
           use_more_bits(i, 48) (i < 6, i >= 42, (i - 6) % 3 == 2: 24 of 48), else Q4_K;
           every other weight Q4_K (token_embd included)
  In both, norms and the router (ffn_gate_inp) stay F32, as llama-quantize leaves them.
gpt-oss shapes (openai/gpt-oss-20b's config.json as llama.cpp 0.3.36's converter writes it,
conversion/gpt_oss.py; the tensors llama_model_openai_moe::load_arch_tensors reads):
  20b      24 layers, n_embd 2880, 64 query / 8 KV heads of 64, 32 experts, 4 used, expert
           FFN 2880, sliding window 128 on the even layers, rope base 150000, YaRN factor 32
           over an original context of 4096 (betas 32 / 1), context 131072, RMS eps 1e-5,
           Q/K/V/output biases, attention sinks, router and expert biases, untied output;
           vocabulary 201088 (o200k_harmony's size)
  smoke    the same layout at toy size: 2 layers, n_embd 512, 8 / 2 heads of 64, 8 experts,
           2 used, expert FFN 512; the same vocabulary
gpt-oss mix (llama-quantize's MXFP4_MOE, llama-quant.cpp llama_tensor_get_type_impl):
  mxfp4    the 3-D expert weights (ffn_{gate,up,down}_exps, ne[2] > 1) MXFP4 ("MoE tensors
           -> MXFP4"); every other 2-D weight Q8_0 ("other tensors -> Q8_0"), token_embd
           included; output.weight Q8_0 too ("if (ftype == LLAMA_FTYPE_MOSTLY_MXFP4_MOE)
           new_type = GGML_TYPE_Q8_0" in the output branch). F32 stay what
           tensor_allows_quantization skips: 1-D tensors (norms, attn_sinks, the Q/K/V/O and
           router biases), names not ending in "weight" (the 2-D expert biases), and the
           router ffn_gate_inp.weight.
Weights: random nibbles / 6- / 8-bit values and random sub-block scales, with each block's
scale set so that a row's weights have a standard deviation of about 1/sqrt(n_in) and mean
about 0 (random sign per block; MXFP4's values are symmetric, its E8M0 exponent a power of
two rounded up or down at random): activations stay finite over the layers. Norms 1.0; router
F32 N(0, 1/n_embd); biases N(0, 0.02^2); sinks N(0, 1). The output says nothing sensible; only
shape and types matter.
Vocabulary: `qwen` (qwen3moe's default) copies Qwen2's byte-level BPE (tokens, types, merges)
from llama.cpp's models/ggml-vocab-qwen2.gguf and adds Qwen3's added tokens 151646-151668
(<|...|> CONTROL, <think> and the tool tags USER_DEFINED), eos <|im_end|>, Qwen3's chat
template (models/templates/Qwen-Qwen3-0.6B.jinja); both files come with the llama.cpp
sources perf/peer/build_llama_cpp.sh 0.3.36 extracts. `generated` synthesizes a byte-level
BPE vocabulary of the same size (256 byte tokens, then merges) and a ChatML template.
gpt-oss has only `generated` (llama.cpp ships no o200k vocabulary): merges up to id 199997,
then o200k_harmony's specials at their ids (<|startoftext|> 199998 bos, <|endoftext|> 199999
pad, <|return|> 200002 eos, <|constrain|>, <|channel|>, <|start|>, <|end|>, <|message|>,
<|call|> 200012, <|endofprompt|> 200018, <|reserved_N|> elsewhere up to 201087), all CONTROL
as the converter types them; pre-tokenizer gpt-4o; the chat template
models/templates/openai-gpt-oss-120b.jinja of the llama.cpp sources.
Output: DIR/qwen3moe-<shape>-<mix>.gguf or DIR/gpt-oss-<shape>-<mix>.gguf (DIR default
~/.cache/spate/models/big), written as .tmp and renamed; an existing file is kept unless
--force. Streams every tensor in chunks of at most 64 MiB: the memory needed is that, not the file.
Needs the PyPI `gguf` and `numpy` packages.
"""
import argparse
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

try:
    import gguf
    from gguf.constants import GGML_QUANT_SIZES, MODEL_ARCH, MODEL_TENSOR, MODEL_TENSORS, TENSOR_NAMES
except ImportError:
    sys.exit("make_moe_model.py: needs the PyPI package gguf (pip install gguf)")

Q = gguf.GGMLQuantizationType
LLAMA_SRC = Path.home() / ".cache" / "spate" / "peer" / "0.3.36" / "src" / "llama.cpp"
DEFAULT_VOCAB = LLAMA_SRC / "models" / "ggml-vocab-qwen2.gguf"
DEFAULT_TEMPLATE = LLAMA_SRC / "models" / "templates" / "Qwen-Qwen3-0.6B.jinja"
GPT_OSS_TEMPLATE = LLAMA_SRC / "models" / "templates" / "openai-gpt-oss-120b.jinja"
DEFAULT_OUT_DIR = Path.home() / ".cache" / "spate" / "models" / "big"
N_VOCAB = 151936
BOS_ID, EOS_ID, PAD_ID = 151643, 151645, 151643  # <|endoftext|>, <|im_end|>, <|endoftext|>
CHUNK_BYTES = 64 << 20

SHAPES = {
    "30b-a3b": dict(layers=48, embd=2048, heads=32, kv_heads=4, head_dim=128, experts=128, used=8,
                    expert_ff=768, ff=6144, ctx=40960),
    "smoke": dict(layers=2, embd=512, heads=4, kv_heads=2, head_dim=128, experts=16, used=4,
                  expert_ff=256, ff=1024, ctx=4096),
}
GPT_OSS_SHAPES = {
    "20b": dict(layers=24, embd=2880, heads=64, kv_heads=8, head_dim=64, experts=32, used=4, expert_ff=2880,
                ctx=131072, window=128),
    "smoke": dict(layers=2, embd=512, heads=8, kv_heads=2, head_dim=64, experts=8, used=2, expert_ff=512,
                  ctx=4096, window=128),
}
FILE_TYPES = {"q4_0": gguf.LlamaFileType.MOSTLY_Q4_0, "q4_k_m": gguf.LlamaFileType.MOSTLY_Q4_K_M,
              "mxfp4": gguf.LlamaFileType.MOSTLY_MXFP4_MOE}

# gpt-oss's o200k_harmony: o200k_base's 199998 tokens, then specials up to 201087 (the ids of
# openai/gpt-oss-20b's tokenizer_config.json added_tokens_decoder; the others <|reserved_N|>).
GPT_OSS_VOCAB, GPT_OSS_N_NORMAL = 201088, 199998
HARMONY = {199998: "<|startoftext|>", 199999: "<|endoftext|>", 200002: "<|return|>", 200003: "<|constrain|>",
           200005: "<|channel|>", 200006: "<|start|>", 200007: "<|end|>", 200008: "<|message|>", 200012: "<|call|>",
           200018: "<|endofprompt|>"}
GPT_OSS_BOS, GPT_OSS_EOS, GPT_OSS_PAD = 199998, 200002, 199999  # <|startoftext|>, <|return|>, <|endoftext|>

# Qwen3's added tokens after <|im_end|> (tokenizer_config.json's added_tokens_decoder).
QWEN3_ADDED = ["<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>", "<|box_end|>",
               "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
               "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
               "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
               "<tool_response>", "</tool_response>", "<think>", "</think>"]
CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
          "+ '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
          "{% endif %}")


def tensor_name(kind, layer=None, arch=MODEL_ARCH.QWEN3MOE, suffix="weight"):
    """The GGUF name llama.cpp reads for tensor kind of arch (gguf-py's TENSOR_NAMES), with "." + suffix."""
    assert kind in MODEL_TENSORS[arch], kind
    return TENSOR_NAMES[kind].format(bid=layer) + "." + suffix


def use_more_bits(i, n):
    """llama-quant.cpp's use_more_bits: the layers Q4_K_M gives more bits."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def weight_type(mix, kind, layer, n_layer):
    """The GGML type llama-quantize gives a 2-D / 3-D weight in the mix (see the docstring)."""
    if mix == "mxfp4":
        return Q.MXFP4 if kind in (MODEL_TENSOR.FFN_GATE_EXP, MODEL_TENSOR.FFN_UP_EXP, MODEL_TENSOR.FFN_DOWN_EXP) else Q.Q8_0
    if mix == "q4_0":
        return Q.Q4_0
    if kind == MODEL_TENSOR.OUTPUT:
        return Q.Q6_K
    if kind in (MODEL_TENSOR.ATTN_V, MODEL_TENSOR.FFN_DOWN_EXP) and use_more_bits(layer, n_layer):
        return Q.Q6_K
    return Q.Q4_K


# --- random quantized blocks ---------------------------------------------------------------------------------

# Standard deviation of a block's integer weights (the value times its sub-block scale) for random
# bytes: Q4_0 (q - 8), q uniform 0..15; Q4_K sc*q - 7.5*m, sc, m uniform 0..63; Q6_K scale*(q - 32),
# scale uniform int8, q uniform 0..63; Q8_0 q uniform int8; MXFP4 kvalues_mxfp4[q] (0, +-1, +-2,
# +-3, +-4, +-6, +-8, +-12), q uniform 0..15: sqrt(274 / 8).
INT_STD = {Q.Q4_0: 4.61, Q.Q4_K: 256.0, Q.Q6_K: 1369.0, Q.Q8_0: 73.9, Q.MXFP4: 5.85}
# Byte offsets of the fp16 scales in a block: d (and dmin for Q4_K, set to 7.5 d so the mean is 0).
D_OFFSET = {Q.Q4_0: 0, Q.Q4_K: 0, Q.Q6_K: 208, Q.Q8_0: 0}


def mxfp4_exponents(rng, n_blocks, std):
    """n_blocks E8M0 bytes e, block_mxfp4's first byte, whose scale 2^(e - 128) (ggml's
    GGML_E8M0_TO_FP32_HALF) times INT_STD is about std: e is x = 128 + log2(std / INT_STD) rounded
    down, or up with the probability p that makes the mean variance std^2
    (p 4^ceil + (1 - p) 4^floor = 4^x)."""
    x = 128.0 + np.log2(std / INT_STD[Q.MXFP4])
    lo = np.floor(x)
    p = (4.0 ** (x - lo) - 1.0) / 3.0
    return (lo + (rng.random(n_blocks) < p)).astype(np.uint8)


def random_blocks(rng, qtype, n_blocks, std):
    """n_blocks random blocks of qtype as a (n_blocks, block bytes) uint8 array."""
    bs = GGML_QUANT_SIZES[qtype][1]
    n = n_blocks * bs
    raw = rng.bit_generator.random_raw((n + 7) // 8).view(np.uint8)[:n].reshape(n_blocks, bs)
    if qtype == Q.MXFP4:
        raw[:, 0] = mxfp4_exponents(rng, n_blocks, std)
        return raw
    sign = np.where(rng.random(n_blocks, dtype=np.float32) < 0.5, -1.0, 1.0).astype(np.float32)
    d = (std / INT_STD[qtype]) * rng.uniform(0.75, 1.25, n_blocks).astype(np.float32) * sign
    o = D_OFFSET[qtype]
    raw[:, o:o + 2] = d.astype(np.float16).view(np.uint8).reshape(n_blocks, 2)
    if qtype == Q.Q4_K:
        raw[:, 2:4] = (d * 7.5).astype(np.float16).view(np.uint8).reshape(n_blocks, 2)
    return raw


class Tensor:
    """One tensor to write: GGUF dims (n_in first), type, and how to make its bytes in chunks."""

    def __init__(self, name, ne, qtype, std=None, fill=None):
        self.name, self.ne, self.qtype, self.std, self.fill = name, ne, qtype, std, fill
        n_el = int(np.prod(ne))
        block, size = GGML_QUANT_SIZES[qtype]
        if ne[0] % block:
            raise ValueError(f"{name}: row of {ne[0]} is not a multiple of {qtype.name}'s block of {block}")
        self.nbytes = n_el // block * size

    def chunks(self, rng):
        if self.fill is not None:
            yield self.fill(rng)
            return
        bs = GGML_QUANT_SIZES[self.qtype][1]
        total = self.nbytes // bs
        step = max(1, CHUNK_BYTES // bs)
        for first in range(0, total, step):
            yield random_blocks(rng, self.qtype, min(step, total - first), self.std)


def ones(n):
    """A Tensor fill: n F32 ones."""
    return lambda rng: np.ones(n, dtype=np.float32)


def normal(ne, std):
    """A Tensor fill: F32 N(0, std^2) of GGUF dims ne."""
    return lambda rng: rng.standard_normal(tuple(reversed(ne)), dtype=np.float32) * np.float32(std)


def plan_qwen3moe(shape, mix):
    """The tensors of the qwen3moe model in file order."""
    s = SHAPES[shape]
    L, E = s["layers"], s["embd"]
    q_dim, kv_dim = s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"]
    T = MODEL_TENSOR

    def w(kind, layer, *ne):
        return Tensor(tensor_name(kind, layer), list(ne), weight_type(mix, kind, layer, L), std=ne[0] ** -0.5)

    out = [w(T.TOKEN_EMBD, None, E, N_VOCAB)]
    for i in range(L):
        router = lambda rng: (rng.standard_normal((s["experts"], E), dtype=np.float32) * E ** -0.5)
        out += [Tensor(tensor_name(T.ATTN_NORM, i), [E], Q.F32, fill=ones(E)),
                w(T.ATTN_Q, i, E, q_dim), w(T.ATTN_K, i, E, kv_dim), w(T.ATTN_V, i, E, kv_dim),
                w(T.ATTN_OUT, i, q_dim, E),
                Tensor(tensor_name(T.ATTN_Q_NORM, i), [s["head_dim"]], Q.F32, fill=ones(s["head_dim"])),
                Tensor(tensor_name(T.ATTN_K_NORM, i), [s["head_dim"]], Q.F32, fill=ones(s["head_dim"])),
                Tensor(tensor_name(T.FFN_NORM, i), [E], Q.F32, fill=ones(E)),
                Tensor(tensor_name(T.FFN_GATE_INP, i), [E, s["experts"]], Q.F32, fill=router),
                w(T.FFN_GATE_EXP, i, E, s["expert_ff"], s["experts"]),
                w(T.FFN_UP_EXP, i, E, s["expert_ff"], s["experts"]),
                w(T.FFN_DOWN_EXP, i, s["expert_ff"], E, s["experts"])]
    out += [Tensor(tensor_name(T.OUTPUT_NORM), [E], Q.F32, fill=ones(E)), w(T.OUTPUT, None, E, N_VOCAB)]
    return out


def plan_gpt_oss(shape, mix):
    """The tensors of the gpt-oss model in file order: the names and GGUF dims of llama.cpp's
    llama_model_openai_moe::load_arch_tensors, in tests/reference/make_random_models.py's
    write_gpt_oss_model's order."""
    s = GPT_OSS_SHAPES[shape]
    L, E, X, F, H = s["layers"], s["embd"], s["experts"], s["expert_ff"], s["heads"]
    q_dim, kv_dim = H * s["head_dim"], s["kv_heads"] * s["head_dim"]
    T = MODEL_TENSOR

    def w(kind, layer, *ne):
        name = tensor_name(kind, layer, MODEL_ARCH.GPT_OSS)
        return Tensor(name, list(ne), weight_type(mix, kind, layer, L), std=ne[0] ** -0.5)

    def f32(kind, layer, ne, fill, suffix="weight"):
        return Tensor(tensor_name(kind, layer, MODEL_ARCH.GPT_OSS, suffix), list(ne), Q.F32, fill=fill)

    bias = lambda kind, layer, *ne: f32(kind, layer, ne, normal(ne, 0.02), "bias")
    norm = lambda kind, layer=None: f32(kind, layer, [E], ones(E))
    out = [w(T.TOKEN_EMBD, None, E, GPT_OSS_VOCAB), norm(T.OUTPUT_NORM)]
    for i in range(L):
        out += [norm(T.ATTN_NORM, i),
                w(T.ATTN_Q, i, E, q_dim), bias(T.ATTN_Q, i, q_dim),
                w(T.ATTN_K, i, E, kv_dim), bias(T.ATTN_K, i, kv_dim),
                w(T.ATTN_V, i, E, kv_dim), bias(T.ATTN_V, i, kv_dim),
                w(T.ATTN_OUT, i, q_dim, E), bias(T.ATTN_OUT, i, E),
                f32(T.ATTN_SINKS, i, [H], normal([H], 1.0)),
                norm(T.ATTN_POST_NORM, i),
                f32(T.FFN_GATE_INP, i, [E, X], normal([E, X], E ** -0.5)), bias(T.FFN_GATE_INP, i, X),
                w(T.FFN_GATE_EXP, i, E, F, X), bias(T.FFN_GATE_EXP, i, F, X),
                w(T.FFN_UP_EXP, i, E, F, X), bias(T.FFN_UP_EXP, i, F, X),
                w(T.FFN_DOWN_EXP, i, F, E, X), bias(T.FFN_DOWN_EXP, i, E, X)]
    out.append(w(T.OUTPUT, None, E, GPT_OSS_VOCAB))
    return out


# --- vocabulary -------------------------------------------------------------------------------------------------

def field_value(reader, name):
    f = reader.fields.get(name)
    if f is None:
        return None
    if f.types[0] == gguf.GGUFValueType.ARRAY:
        if f.types[1] == gguf.GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        return [int(f.parts[i][0]) for i in f.data]
    if f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8")
    return f.parts[f.data[0]][0].item()


def qwen_vocab(path):
    """Qwen2's tokens, types and merges, with Qwen3's added tokens in place of [PAD] entries."""
    if not Path(path).is_file():
        sys.exit(f"make_moe_model.py: {path} missing: run perf/peer/build_llama_cpp.sh 0.3.36 (it extracts the "
                 f"llama.cpp sources), pass --vocab-from, or use --vocab generated")
    r = gguf.GGUFReader(str(path))
    tokens, types = field_value(r, "tokenizer.ggml.tokens"), field_value(r, "tokenizer.ggml.token_type")
    if len(tokens) != N_VOCAB or tokens[EOS_ID] != "<|im_end|>":
        sys.exit(f"make_moe_model.py: {path} is not Qwen2's vocabulary of {N_VOCAB} tokens")
    for i, t in enumerate(QWEN3_ADDED, start=EOS_ID + 1):
        tokens[i] = t
        types[i] = gguf.TokenType.CONTROL if t.startswith("<|") else gguf.TokenType.USER_DEFINED
    return tokens, types, field_value(r, "tokenizer.ggml.merges")


def bytes_to_unicode():
    """GPT-2's byte -> printable character map (byte-level BPE's base alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def generated_vocab(n_normal, specials, n_vocab):
    """A valid byte-level BPE vocabulary of n_vocab entries: 256 byte tokens, merges of two
    existing tokens (each merge's result a new token, at most 12 characters) up to n_normal,
    then specials ((text, token type) pairs), then [PAD<id>] UNUSED."""
    tokens = bytes_to_unicode()
    seen, merges = set(tokens), []
    k = 0
    while len(tokens) < n_normal:
        k += 1
        a = tokens[(k * 2654435761) % min(len(tokens), 20000)]
        b = tokens[(k * 40503) % 256 if k % 3 else (k * 97) % len(tokens)]
        if a + b in seen or len(a + b) > 12:
            continue
        seen.add(a + b)
        tokens.append(a + b)
        merges.append(f"{a} {b}")
    types = [gguf.TokenType.NORMAL] * len(tokens)
    for t, kind in specials:
        tokens.append(t)
        types.append(kind)
    while len(tokens) < n_vocab:
        tokens.append(f"[PAD{len(tokens)}]")
        types.append(gguf.TokenType.UNUSED)
    return tokens, types, merges


def qwen_generated_vocab():
    """generated_vocab of Qwen's size, its specials from BOS_ID (<|...|> CONTROL, the others USER_DEFINED)."""
    specials = [(t, gguf.TokenType.CONTROL if t.startswith("<|") else gguf.TokenType.USER_DEFINED)
                for t in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + QWEN3_ADDED]
    return generated_vocab(BOS_ID, specials, N_VOCAB)


def harmony_vocab():
    """generated_vocab of o200k_harmony's size with its specials (HARMONY, else <|reserved_N|>), all CONTROL."""
    specials = [(HARMONY.get(i, f"<|reserved_{i}|>"), gguf.TokenType.CONTROL)
                for i in range(GPT_OSS_N_NORMAL, GPT_OSS_VOCAB)]
    return generated_vocab(GPT_OSS_N_NORMAL, specials, GPT_OSS_VOCAB)


def add_tokenizer(w, pre, vocab, bos, eos, pad, template):
    """A byte-level BPE ("gpt2") tokenizer: vocab is (tokens, types, merges); no automatic bos."""
    tokens, types, merges = vocab
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)
    w.add_pad_token_id(pad)
    w.add_add_bos_token(False)
    w.add_chat_template(template)


def add_vocab(w, a):
    """qwen3moe's tokenizer (a.vocab, a.vocab_from, a.chat_template: see the docstring)."""
    vocab = qwen_vocab(a.vocab_from) if a.vocab == "qwen" else qwen_generated_vocab()
    tmpl = Path(a.chat_template)
    template = tmpl.read_text() if a.vocab == "qwen" and tmpl.is_file() else CHATML
    add_tokenizer(w, "qwen2", vocab, BOS_ID, EOS_ID, PAD_ID, template)


def add_gpt_oss_vocab(w, a):
    """gpt-oss's tokenizer: harmony_vocab, pre-tokenizer gpt-4o, the chat template a.chat_template."""
    tmpl = Path(a.chat_template)
    if not tmpl.is_file():
        sys.exit(f"make_moe_model.py: {tmpl} missing: run perf/peer/build_llama_cpp.sh 0.3.36 (it extracts the "
                 f"llama.cpp sources) or pass --chat-template (e.g. openai-gpt-oss-120b.jinja)")
    add_tokenizer(w, "gpt-4o", harmony_vocab(), GPT_OSS_BOS, GPT_OSS_EOS, GPT_OSS_PAD, tmpl.read_text())


# --- the file -------------------------------------------------------------------------------------------------

def add_qwen3moe_metadata(w, s, shape, mix, a):
    """qwen3moe's hyper-parameters (SHAPES[shape] s) and tokenizer."""
    w.add_name(f"Qwen3-{shape.upper()} random weights ({mix})")
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_file_type(FILE_TYPES[mix])
    w.add_block_count(s["layers"])
    w.add_context_length(s["ctx"])
    w.add_embedding_length(s["embd"])
    w.add_feed_forward_length(s["ff"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_expert_count(s["experts"])
    w.add_expert_used_count(s["used"])
    w.add_key_length(s["head_dim"])
    w.add_value_length(s["head_dim"])
    w.add_expert_feed_forward_length(s["expert_ff"])
    add_vocab(w, a)


def add_gpt_oss_metadata(w, s, shape, mix, a):
    """gpt-oss's hyper-parameters (GPT_OSS_SHAPES[shape] s), the keys llama.cpp's converter writes
    (TextModel.set_gguf_parameters, then GptOssModel's sliding window and expert FFN), and tokenizer.
    Rope and norm values are gpt-oss-20b's config.json's: rope_theta 150000, rope_scaling yarn
    (factor 32, original_max_position_embeddings 4096, beta_fast 32, beta_slow 1), rms_norm_eps 1e-5."""
    w.add_name(f"gpt-oss-{shape} random weights ({mix})")
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_file_type(FILE_TYPES[mix])
    w.add_block_count(s["layers"])
    w.add_context_length(s["ctx"])
    w.add_embedding_length(s["embd"])
    w.add_feed_forward_length(s["expert_ff"])  # config.json's intermediate_size
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(32.0)
    w.add_rope_scaling_orig_ctx_len(4096)
    w.add_rope_scaling_yarn_beta_fast(32.0)
    w.add_rope_scaling_yarn_beta_slow(1.0)
    w.add_rope_freq_base(150000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_expert_count(s["experts"])
    w.add_expert_used_count(s["used"])
    w.add_key_length(s["head_dim"])
    w.add_value_length(s["head_dim"])
    w.add_sliding_window(s["window"])
    w.add_expert_feed_forward_length(s["expert_ff"])
    add_gpt_oss_vocab(w, a)


# Per architecture (the GGUF general.architecture): its shapes, mixes ("all" writes each), vocabularies,
# default chat template (the first shape and vocabulary are the defaults), tensor plan and metadata writer.
ARCHS = {
    "qwen3moe": dict(shapes=SHAPES, mixes=("q4_0", "q4_k_m"), vocabs=("qwen", "generated"), template=DEFAULT_TEMPLATE,
                     plan=plan_qwen3moe, metadata=add_qwen3moe_metadata),
    "gpt-oss": dict(shapes=GPT_OSS_SHAPES, mixes=("mxfp4",), vocabs=("generated",), template=GPT_OSS_TEMPLATE,
                    plan=plan_gpt_oss, metadata=add_gpt_oss_metadata),
}


def write_model(out, arch, shape, mix, a):
    """Writes the random model arch / shape / mix to out (via out.tmp), streaming the tensors."""
    spec = ARCHS[arch]
    s = spec["shapes"][shape]
    tensors = spec["plan"](shape, mix)
    size = sum(t.nbytes for t in tensors)
    free = shutil.disk_usage(out.parent).free
    if free < size + (1 << 30):
        sys.exit(f"make_moe_model.py: {out.parent} has {free / 1e9:.1f} GB free, {out.name} needs {size / 1e9:.1f} GB")
    tmp = out.with_name(out.name + ".tmp")
    w = gguf.GGUFWriter(str(tmp), arch)
    spec["metadata"](w, s, shape, mix, a)
    for t in tensors:
        # GGUF dims are n_in first; add_tensor_info takes numpy order (reversed).
        w.add_tensor_info(t.name, list(reversed(t.ne)), np.dtype(np.float32), t.nbytes, raw_dtype=t.qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    stream_tensors(w, tensors, np.random.Generator(np.random.PCG64(a.seed)), s["layers"])
    w.close()
    os.replace(tmp, out)
    by_type = {}
    for t in tensors:
        by_type[t.qtype.name] = by_type.get(t.qtype.name, 0) + t.nbytes
    print(f"{out}: {len(tensors)} tensors, {out.stat().st_size / 1e9:.2f} GB ("
          + ", ".join(f"{k} {v / 1e9:.2f} GB" for k, v in sorted(by_type.items())) + ")", file=sys.stderr)


def stream_tensors(w, tensors, rng, n_layer):
    """Writes the tensors' data after w's tensor infos, chunk by chunk, each padded to the alignment;
    reports progress after each layer's ffn_down_exps."""
    fout = w.fout[0]
    w.write_padding(fout, fout.tell())
    size = sum(t.nbytes for t in tensors)
    t0, done = time.monotonic(), 0
    for t in tensors:
        n = 0
        for chunk in t.chunks(rng):
            chunk.tofile(fout)
            n += chunk.nbytes
        if n != t.nbytes:
            raise RuntimeError(f"{t.name}: wrote {n} bytes, expected {t.nbytes}")
        w.write_padding(fout, n)
        done += n
        if t.name.endswith("ffn_down_exps.weight"):
            print(f"  {int(t.name.split('.')[1]) + 1:>3}/{n_layer} layers, {done / 1e9:.1f} of {size / 1e9:.1f} GB, "
                  f"{time.monotonic() - t0:.0f} s", file=sys.stderr)


def resolve_args(ap, a):
    """Fills the per-architecture defaults of --shape, --vocab, --chat-template; rejects the values
    the architecture does not have. Returns the mixes to write."""
    spec = ARCHS[a.arch]
    a.shape = a.shape or next(iter(spec["shapes"]))
    a.vocab = a.vocab or spec["vocabs"][0]
    a.chat_template = a.chat_template or str(spec["template"])
    if a.shape not in spec["shapes"]:
        ap.error(f"--arch {a.arch} has the shapes {', '.join(spec['shapes'])}")
    if a.vocab not in spec["vocabs"]:
        ap.error(f"--arch {a.arch} has the vocabularies {', '.join(spec['vocabs'])}")
    if a.mix != "all" and a.mix not in spec["mixes"]:
        ap.error(f"--arch {a.arch} has the mixes {', '.join(spec['mixes'])} (or all)")
    return list(spec["mixes"]) if a.mix == "all" else [a.mix]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", choices=list(ARCHS), default="qwen3moe")
    ap.add_argument("--shape", choices=sorted(set(SHAPES) | set(GPT_OSS_SHAPES)),
                    help="qwen3moe: 30b-a3b (default), smoke; gpt-oss: 20b (default), smoke")
    ap.add_argument("--mix", choices=sorted({m for spec in ARCHS.values() for m in spec["mixes"]}) + ["all"],
                    default="all", help="qwen3moe: q4_0, q4_k_m; gpt-oss: mxfp4")
    ap.add_argument("--out-dir", default=str(DEFAULT_OUT_DIR))
    ap.add_argument("--vocab", choices=["qwen", "generated"], help="qwen3moe: qwen (default), generated; gpt-oss: generated")
    ap.add_argument("--vocab-from", default=str(DEFAULT_VOCAB))
    ap.add_argument("--chat-template", help=f"default {DEFAULT_TEMPLATE} (qwen3moe), {GPT_OSS_TEMPLATE} (gpt-oss)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--force", action="store_true", help="rewrite a file that exists")
    a = ap.parse_args()
    mixes = resolve_args(ap, a)
    out_dir = Path(a.out_dir).expanduser()
    out_dir.mkdir(parents=True, exist_ok=True)
    for mix in mixes:
        out = out_dir / f"{a.arch}-{a.shape}-{mix}.gguf"
        if out.exists() and not a.force:
            print(f"{out}: exists, kept (--force rewrites it)", file=sys.stderr)
        else:
            write_model(out, a.arch, a.shape, mix, a)
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
