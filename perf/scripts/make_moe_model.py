#!/usr/bin/env python3
"""Writes a random-weight `qwen3moe` GGUF with Qwen3-30B-A3B's shape (issue 35), quantized
blocks written directly, for the mixture-of-experts benchmarks (perf/scripts/bench_moe.sh).
The files are big (17-19 GB): never in the repository, never in CI.

Usage: perf/scripts/make_moe_model.py [--shape 30b-a3b|smoke] [--mix q4_0|q4_k_m|all]
         [--out-dir DIR] [--vocab qwen|generated] [--vocab-from GGUF] [--chat-template FILE]
         [--seed 0] [--force]

Shapes (the hyper-parameters of Qwen/Qwen3-30B-A3B's config.json, as
convert_hf_to_gguf.py writes them for llama.cpp):
  30b-a3b  48 layers, n_embd 2048, 32 query / 4 KV heads of 128, 128 experts, 8 used per
           token, expert FFN 768, (dense) FFN 6144, context 40960, rope base 1e6,
           RMS eps 1e-6, QK-norm, untied output; vocabulary 151936
  smoke    the same layout at toy size for quick tries: 2 layers, n_embd 512, 4 / 2 heads
           of 128, 16 experts, 4 used, expert FFN 256; the same vocabulary
Mixes (the weight types of llama-quantize, llama.cpp 0.3.36 src/llama-quant.cpp):
  q4_0     every 2-D and 3-D weight Q4_0, output and token_embd too (`llama-quantize --pure`)
  q4_k_m   Q4_K_M's rules for this model (128 experts, so none of the 8-expert cases):
           output.weight Q6_K; attn_v and ffn_down_exps Q6_K in the layers where
           use_more_bits(i, 48) (i < 6, i >= 42, (i - 6) % 3 == 2: 24 of 48), else Q4_K;
           every other weight Q4_K (token_embd included)
  In both, norms and the router (ffn_gate_inp) stay F32, as llama-quantize leaves them.
Weights: random nibbles / 6-bit values and random sub-block scales, with each block's fp16
scale set so that a row's weights have a standard deviation of about 1/sqrt(n_in) and mean
about 0 (random sign per block): activations stay finite over the 48 layers. Norms 1.0;
router F32 N(0, 1/n_embd). The output says nothing sensible; only shape and types matter.
Vocabulary: `qwen` (default) copies Qwen2's byte-level BPE (tokens, types, merges) from
llama.cpp's models/ggml-vocab-qwen2.gguf and adds Qwen3's added tokens 151646-151668
(<|...|> CONTROL, <think> and the tool tags USER_DEFINED), eos <|im_end|>, Qwen3's chat
template (models/templates/Qwen-Qwen3-0.6B.jinja); both files come with the llama.cpp
sources perf/peer/build_llama_cpp.sh 0.3.36 extracts. `generated` synthesizes a byte-level
BPE vocabulary of the same size (256 byte tokens, then merges) and a ChatML template.
Output: DIR/qwen3moe-<shape>-<mix>.gguf (DIR default ~/.cache/spate/models/big), written as
.tmp and renamed; an existing file is kept unless --force. Streams every tensor in chunks
of at most 64 MiB: the memory needed is that, not the file.
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
FILE_TYPES = {"q4_0": gguf.LlamaFileType.MOSTLY_Q4_0, "q4_k_m": gguf.LlamaFileType.MOSTLY_Q4_K_M}

# Qwen3's added tokens after <|im_end|> (tokenizer_config.json's added_tokens_decoder).
QWEN3_ADDED = ["<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>", "<|box_end|>",
               "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
               "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
               "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
               "<tool_response>", "</tool_response>", "<think>", "</think>"]
CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
          "+ '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
          "{% endif %}")


def tensor_name(kind, layer=None):
    """The GGUF name llama.cpp reads for tensor kind (gguf-py's TENSOR_NAMES), with ".weight"."""
    assert kind in MODEL_TENSORS[MODEL_ARCH.QWEN3MOE], kind
    return TENSOR_NAMES[kind].format(bid=layer) + ".weight"


def use_more_bits(i, n):
    """llama-quant.cpp's use_more_bits: the layers Q4_K_M gives more bits."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def weight_type(mix, kind, layer, n_layer):
    """The GGML type llama-quantize gives a 2-D / 3-D weight in the mix (see the docstring)."""
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
# scale uniform int8, q uniform 0..63.
INT_STD = {Q.Q4_0: 4.61, Q.Q4_K: 256.0, Q.Q6_K: 1369.0}
# Byte offsets of the fp16 scales in a block: d (and dmin for Q4_K, set to 7.5 d so the mean is 0).
D_OFFSET = {Q.Q4_0: 0, Q.Q4_K: 0, Q.Q6_K: 208}


def random_blocks(rng, qtype, n_blocks, std):
    """n_blocks random blocks of qtype as a (n_blocks, block bytes) uint8 array."""
    bs = GGML_QUANT_SIZES[qtype][1]
    n = n_blocks * bs
    raw = rng.bit_generator.random_raw((n + 7) // 8).view(np.uint8)[:n].reshape(n_blocks, bs)
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


def plan(shape, mix):
    """The tensors of the model in file order."""
    s = SHAPES[shape]
    L, E = s["layers"], s["embd"]
    q_dim, kv_dim = s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"]
    ones = lambda n: (lambda rng: np.ones(n, dtype=np.float32))
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


def generated_vocab():
    """A valid byte-level BPE vocabulary of N_VOCAB entries: 256 byte tokens, merges of two
    existing tokens (each merge's result a new token, at most 12 characters), then the specials."""
    tokens = bytes_to_unicode()
    seen, merges = set(tokens), []
    n_normal = BOS_ID
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
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + QWEN3_ADDED
    for t in specials:
        tokens.append(t)
        types.append(gguf.TokenType.CONTROL if t.startswith("<|") else gguf.TokenType.USER_DEFINED)
    while len(tokens) < N_VOCAB:
        tokens.append(f"[PAD{len(tokens)}]")
        types.append(gguf.TokenType.UNUSED)
    return tokens, types, merges


def add_vocab(w, a):
    tokens, types, merges = qwen_vocab(a.vocab_from) if a.vocab == "qwen" else generated_vocab()
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(BOS_ID)
    w.add_eos_token_id(EOS_ID)
    w.add_pad_token_id(PAD_ID)
    w.add_add_bos_token(False)
    tmpl = Path(a.chat_template)
    w.add_chat_template(tmpl.read_text() if a.vocab == "qwen" and tmpl.is_file() else CHATML)


# --- the file -------------------------------------------------------------------------------------------------

def write_model(out, shape, mix, a):
    s = SHAPES[shape]
    tensors = plan(shape, mix)
    size = sum(t.nbytes for t in tensors)
    free = shutil.disk_usage(out.parent).free
    if free < size + (1 << 30):
        sys.exit(f"make_moe_model.py: {out.parent} has {free / 1e9:.1f} GB free, {out.name} needs {size / 1e9:.1f} GB")
    tmp = out.with_name(out.name + ".tmp")
    w = gguf.GGUFWriter(str(tmp), gguf.MODEL_ARCH_NAMES[MODEL_ARCH.QWEN3MOE])
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
    for t in tensors:
        # GGUF dims are n_in first; add_tensor_info takes numpy order (reversed).
        w.add_tensor_info(t.name, list(reversed(t.ne)), np.dtype(np.float32), t.nbytes, raw_dtype=t.qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    fout = w.fout[0]
    w.write_padding(fout, fout.tell())
    rng = np.random.Generator(np.random.PCG64(a.seed))
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
            print(f"  {int(t.name.split('.')[1]) + 1:>3}/{s['layers']} layers, {done / 1e9:.1f} of {size / 1e9:.1f} GB, "
                  f"{time.monotonic() - t0:.0f} s", file=sys.stderr)
    w.close()
    os.replace(tmp, out)
    by_type = {}
    for t in tensors:
        by_type[t.qtype.name] = by_type.get(t.qtype.name, 0) + t.nbytes
    print(f"{out}: {len(tensors)} tensors, {out.stat().st_size / 1e9:.2f} GB ("
          + ", ".join(f"{k} {v / 1e9:.2f} GB" for k, v in sorted(by_type.items())) + ")", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="30b-a3b")
    ap.add_argument("--mix", choices=["q4_0", "q4_k_m", "all"], default="all")
    ap.add_argument("--out-dir", default=str(DEFAULT_OUT_DIR))
    ap.add_argument("--vocab", choices=["qwen", "generated"], default="qwen")
    ap.add_argument("--vocab-from", default=str(DEFAULT_VOCAB))
    ap.add_argument("--chat-template", default=str(DEFAULT_TEMPLATE))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--force", action="store_true", help="rewrite a file that exists")
    a = ap.parse_args()
    out_dir = Path(a.out_dir).expanduser()
    out_dir.mkdir(parents=True, exist_ok=True)
    for mix in (["q4_0", "q4_k_m"] if a.mix == "all" else [a.mix]):
        out = out_dir / f"qwen3moe-{a.shape}-{mix}.gguf"
        if out.exists() and not a.force:
            print(f"{out}: exists, kept (--force rewrites it)", file=sys.stderr)
        else:
            write_model(out, a.shape, mix, a)
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
