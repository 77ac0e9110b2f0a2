#!/usr/bin/env python3
"""Writes seeded random-weight LoRA adapters for a base GGUF, in llama.cpp's
GGUF adapter format (general.type = adapter, adapter.type = lora,
adapter.lora.alpha; per adapted weight W, "W.lora_a" with GGUF dims
[n_in, rank] and "W.lora_b" with dims [rank, n_out]).

Every attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up and ffn_down of
every layer is adapted, in F16. Deterministic for a given seed, base and
gguf/numpy versions (tests/requirements.txt).

Usage:
  python3 tests/reference/make_lora_adapters.py --base MODEL.gguf --out A.gguf \\
      [--rank 16] [--alpha 32] [--seed 1] [--std-a 0.05] [--std-b 0.02]
  --bad-shape: write one lora_b with a wrong output size (tests of the refusal)
"""
from __future__ import annotations

import argparse

import gguf
import numpy as np

TARGETS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


def base_shapes(path: str):
    """{weight name: (n_in, n_out)} of the adapted weights, and the architecture."""
    r = gguf.GGUFReader(path)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    shapes = {}
    for t in r.tensors:
        parts = t.name.split(".")
        if len(parts) == 4 and parts[0] == "blk" and parts[2] in TARGETS and parts[3] == "weight":
            shapes[t.name] = (int(t.shape[0]), int(t.shape[1]))  # GGUF ne: [n_in, n_out]
    return arch, shapes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--alpha", type=float, default=32.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--std-a", type=float, default=0.05)
    ap.add_argument("--std-b", type=float, default=0.02)
    ap.add_argument("--bad-shape", action="store_true")
    a = ap.parse_args()
    arch, shapes = base_shapes(a.base)
    rng = np.random.default_rng(a.seed)
    w = gguf.GGUFWriter(a.out, arch)
    w.add_string("general.type", "adapter")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", a.alpha)
    bad_done = False
    for name in sorted(shapes, key=lambda n: (int(n.split(".")[1]), n)):
        n_in, n_out = shapes[name]
        lora_a = (rng.standard_normal((a.rank, n_in)) * a.std_a).astype(np.float16)   # numpy [rank, n_in] = GGUF [n_in, rank]
        out = n_out + 8 if a.bad_shape and not bad_done else n_out
        bad_done = True
        lora_b = (rng.standard_normal((out, a.rank)) * a.std_b).astype(np.float16)    # numpy [n_out, rank] = GGUF [rank, n_out]
        w.add_tensor(name + ".lora_a", lora_a)
        w.add_tensor(name + ".lora_b", lora_b)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
