#!/usr/bin/env python3
"""Writes tests/kernels/fixtures/gguf_py_dequant.txt: Q2_K and Q3_K blocks and
their dequantization by the PyPI `gguf` package (gguf.quants.dequantize, the
version pinned in tests/requirements.txt), an implementation independent of
spate's. tests/kernels/test_dequant.cpp compares spate's dequantize_row with it
bit for bit.

Blocks: seeded random bytes with the fp16 scale fields (d, and Q2_K's dmin)
set to finite values of both signs, plus one block of all-ones bits (largest
quants, scales and mins) and one of all-zero bits but the scales.

Format, per type: a line "TYPE N_BLOCKS", one line of the blocks' bytes in hex,
then one line per block of its 256 float32 values as 8-digit hex bit patterns.

Usage: make_dequant_fixture.py [--out PATH]
"""
import argparse
import importlib.metadata
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

# Per type: block bytes, and the byte offsets of its fp16 scale fields.
TYPES = {Q.Q2_K: (84, [80, 82]), Q.Q3_K: (110, [108])}
N_RANDOM = 6


def blocks_for(qtype, rng) -> np.ndarray:
    size, half_offsets = TYPES[qtype]
    blocks = rng.integers(0, 256, size=(N_RANDOM + 2, size), dtype=np.uint8)
    blocks[N_RANDOM] = 0xFF
    blocks[N_RANDOM + 1] = 0
    for i in range(N_RANDOM + 2):
        for off in half_offsets:
            v = np.float16(rng.uniform(0.001, 0.05) * (1 if rng.integers(2) else -1))
            blocks[i, off:off + 2] = np.frombuffer(v.tobytes(), dtype=np.uint8)
    if qtype == Q.Q3_K:
        blocks[N_RANDOM + 1, 96:108] = rng.integers(0, 256, size=12, dtype=np.uint8)
    else:
        blocks[N_RANDOM + 1, 0:16] = rng.integers(0, 256, size=16, dtype=np.uint8)
    return blocks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "kernels/fixtures/gguf_py_dequant.txt"))
    a = ap.parse_args()
    rng = np.random.default_rng(2311)
    lines = [f"# tests/reference/make_dequant_fixture.py, gguf {importlib.metadata.version('gguf')}"]
    for qtype in TYPES:
        blocks = blocks_for(qtype, rng)
        values = gguf.quants.dequantize(blocks.reshape(-1), qtype).astype(np.float32).reshape(len(blocks), 256)
        lines.append(f"{qtype.name} {len(blocks)}")
        lines.append(blocks.tobytes().hex())
        for row in values:
            lines.append(" ".join(f"{int(u):08x}" for u in row.view(np.uint32)))
    Path(a.out).write_text("\n".join(lines) + "\n")
    print(a.out)


if __name__ == "__main__":
    main()
