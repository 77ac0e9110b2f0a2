#!/usr/bin/env python3
"""Writes a random-weight `llama` GGUF of a given shape, for speed benchmarks
of models larger than the default one (issue 14: a 1B-class model with
Llama-3.2-1B's shape and SmolLM2's vocabulary).

Usage: perf/scripts/make_bench_model.py --out FILE [--vocab-from GGUF] [--hidden 2048]
         [--layers 16] [--heads 32] [--kv-heads 8] [--ffn 8192] [--ctx 8192] [--seed 0]
         [--vocab-size N] [--untied]
       perf/scripts/make_bench_model.py --out FILE --shape 8b
         (Llama-3.1-8B: hidden 4096, 32 layers, 32/8 heads, FFN 14336, vocab 128256,
         untied output; issue 37)

Weights are F16, drawn from N(0, 0.02^2) (norm weights 1.0), embeddings tied
(no output.weight) unless --untied, as Llama-3.2-1B; rope base 500000. The tokenizer
(tokens, types, merges, special ids, chat template) is copied from --vocab-from
(default: the default model, SmolLM2-135M-Instruct); --vocab-size pads it with
control tokens "<|reserved_N|>" to N entries, so that the embedding and output
matrices have the real model's size. The output says nothing sensible; only its
shape matters for speed. Tensors are written one at a time (an 8B F16 file is
16 GB; memory holds one tensor). Writes FILE.tmp, then renames.

Needs the PyPI `gguf` and `numpy` packages.
"""
import argparse
import os
import sys
from pathlib import Path

import numpy as np

try:
    import gguf
except ImportError:
    sys.exit("make_bench_model.py: needs the PyPI package gguf (pip install gguf)")

DEFAULT_VOCAB = Path.home() / ".cache" / "spate" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def field_value(reader, name):
    f = reader.fields.get(name)
    if f is None:
        return None
    t = f.types[0]
    if t == gguf.GGUFValueType.ARRAY:
        if f.types[1] == gguf.GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        return [int(f.parts[i][0]) for i in f.data]
    if t == gguf.GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8")
    return f.parts[f.data[0]][0].item()


SHAPES = {  # --shape NAME: the real model's dimensions
    "8b": dict(hidden=4096, layers=32, heads=32, kv_heads=8, ffn=14336, vocab_size=128256, untied=True),
}


def copy_tokenizer(w, src, vocab_size):
    r = gguf.GGUFReader(str(src))
    w.add_tokenizer_model(field_value(r, "tokenizer.ggml.model"))
    pre = field_value(r, "tokenizer.ggml.pre")
    if pre:
        w.add_tokenizer_pre(pre)
    tokens = field_value(r, "tokenizer.ggml.tokens")
    types = field_value(r, "tokenizer.ggml.token_type")
    if vocab_size:
        if vocab_size < len(tokens):
            sys.exit(f"make_bench_model.py: --vocab-size {vocab_size} is below the source's {len(tokens)} tokens")
        pad = vocab_size - len(tokens)
        tokens = tokens + [f"<|reserved_{i}|>" for i in range(pad)]
        types = types + [3] * pad  # CONTROL: never produced by the BPE merges
    w.add_token_list(tokens)
    w.add_token_types(types)
    merges = field_value(r, "tokenizer.ggml.merges")
    if merges:
        w.add_token_merges(merges)
    for key, add in (("bos_token_id", w.add_bos_token_id), ("eos_token_id", w.add_eos_token_id),
                     ("unknown_token_id", w.add_unk_token_id), ("padding_token_id", w.add_pad_token_id)):
        v = field_value(r, "tokenizer.ggml." + key)
        if v is not None:
            add(int(v))
    for key, add in (("add_bos_token", w.add_add_bos_token), ("add_space_prefix", w.add_add_space_prefix)):
        v = field_value(r, "tokenizer.ggml." + key)
        if v is not None:
            add(bool(v))
    tmpl = field_value(r, "tokenizer.chat_template")
    if tmpl:
        w.add_chat_template(tmpl)
    return len(tokens)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab-from", default=str(DEFAULT_VOCAB))
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--ffn", type=int, default=8192)
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab-size", type=int, default=0, help="pad the vocabulary to N tokens")
    ap.add_argument("--untied", action="store_true", help="write output.weight (no tied embeddings)")
    ap.add_argument("--shape", choices=sorted(SHAPES), help="a named real shape (overrides the sizes)")
    a = ap.parse_args()
    if a.shape:
        for k, v in SHAPES[a.shape].items():
            setattr(a, k, v)
    if a.hidden % a.heads or a.heads % a.kv_heads:
        sys.exit("make_bench_model.py: --hidden must divide by --heads, and --heads by --kv-heads")
    out = Path(a.out)
    tmp = out.with_name(out.name + ".tmp")
    rng = np.random.default_rng(a.seed)
    head_dim = a.hidden // a.heads
    w = gguf.GGUFWriter(str(tmp), "llama")
    w.add_name(f"bench-llama-{a.hidden}x{a.layers}")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_context_length(a.ctx)
    w.add_embedding_length(a.hidden)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(a.ffn)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    n_vocab = copy_tokenizer(w, a.vocab_from, a.vocab_size)
    w.add_vocab_size(n_vocab)
    plan = []  # (name, numpy shape, dtype): tensor infos first, then the data in this order

    def weight(name, n_out, n_in):
        # numpy shape (n_out, n_in): GGUF dims (n_in, n_out), rows of n_in values.
        plan.append((name, (n_out, n_in), np.float16))

    def norm(name, n):
        plan.append((name, (n,), np.float32))

    weight("token_embd.weight", n_vocab, a.hidden)
    norm("output_norm.weight", a.hidden)
    if a.untied:
        weight("output.weight", n_vocab, a.hidden)
    kv = a.kv_heads * head_dim
    for i in range(a.layers):
        p = f"blk.{i}."
        norm(p + "attn_norm.weight", a.hidden)
        weight(p + "attn_q.weight", a.hidden, a.hidden)
        weight(p + "attn_k.weight", kv, a.hidden)
        weight(p + "attn_v.weight", kv, a.hidden)
        weight(p + "attn_output.weight", a.hidden, a.hidden)
        norm(p + "ffn_norm.weight", a.hidden)
        weight(p + "ffn_gate.weight", a.ffn, a.hidden)
        weight(p + "ffn_up.weight", a.ffn, a.hidden)
        weight(p + "ffn_down.weight", a.hidden, a.ffn)
    for name, shape, dtype in plan:
        w.add_tensor_info(name, shape, np.dtype(dtype), int(np.prod(shape)) * np.dtype(dtype).itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, shape, dtype in plan:
        if dtype == np.float32:
            w.write_tensor_data(np.ones(shape, dtype=np.float32))
            continue
        v = np.empty(shape, dtype=np.float16)
        step = max(1, (1 << 24) // shape[1])  # rows per chunk: 16 M values (64 MB of f32)
        for r in range(0, shape[0], step):
            v[r:r + step] = rng.standard_normal((min(step, shape[0] - r), shape[1]), dtype=np.float32) * 0.02
        w.write_tensor_data(v)
    w.close()
    os.replace(tmp, out)
    print(out)


if __name__ == "__main__":
    main()
