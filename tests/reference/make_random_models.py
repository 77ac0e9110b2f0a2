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

Usage: make_random_models.py --out-dir DIR [--check FIXTURE.json]
Prints one line per model: its architecture and path.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np
import gguf

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
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(vocab["pre"])
    w.add_token_list(vocab["tokens"])
    w.add_token_types(vocab["types"])
    w.add_token_merges(vocab["merges"])
    w.add_bos_token_id(vocab["bos"])
    w.add_eos_token_id(vocab["eos"])
    w.add_add_bos_token(False)

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


ARCHS = {"qwen3": 1003, "gemma3": 1004, "phi3": 1005}  # architecture -> seed


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--vocab-model", default=os.environ.get("SPATE_MODEL", DEFAULT_VOCAB_MODEL))
    ap.add_argument("--check", help="fixture JSON whose per-model sha256 the files must match")
    args = ap.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    expected = {}
    if args.check:
        expected = {m["arch"]: m["sha256"] for m in json.loads(Path(args.check).read_text())["models"]}
    vocab = vocab_fields(args.vocab_model)
    for arch, seed in ARCHS.items():
        path = out / f"random-{arch}.gguf"
        if not (path.exists() and expected.get(arch) == sha256(path)):
            write_model(arch, path, vocab, seed)
        digest = sha256(path)
        if arch in expected and expected[arch] != digest:
            print(f"{path}: sha256 {digest} differs from the fixture's {expected[arch]} "
                  f"(another gguf/numpy version?); the reference logits do not apply", file=sys.stderr)
            return 1
        print(arch, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
