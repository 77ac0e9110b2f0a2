#!/usr/bin/env python3
"""Writes tests/kernels/fixtures/gguf_py_dequant.txt: Q2_K, Q3_K, IQ4_NL and MXFP4 blocks and
their dequantization by the PyPI `gguf` package (gguf.quants.dequantize, the
version pinned in tests/requirements.txt), an implementation independent of
spate's. tests/kernels/test_dequant.cpp compares spate's dequantize_row with it
bit for bit.

Blocks: seeded random bytes with the fp16 scale fields (d, and Q2_K's dmin)
set to finite values of both signs, plus one block of all-ones bits (largest
quants, scales and mins) and one of all-zero bits but the scales (IQ4_NL:
every quant 15, and every quant 0, the two ends of its code book). MXFP4 has
no fp16 field: its random blocks keep random E8M0 exponents, the first ones
set to the extremes (0 and 1: subnormal scales; 254, 255: values that
overflow to infinity), the others quantized by the package from normal values,
and the all-ones block is e = 255 with every value -12.

Format, per type: a line "TYPE N_BLOCKS", one line of the blocks' bytes in hex,
then one line per block of its float32 values (256 for the K-quants, 32 for
IQ4_NL and MXFP4) as 8-digit hex bit patterns.

Usage: make_dequant_fixture.py [--out PATH]
"""
import argparse
import importlib.metadata
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

# Per type: block bytes, the byte offsets of its fp16 scale fields, elements
# per block and random blocks. (Types added later come last: the earlier types'
# draws, and so their fixture lines, are the same as before they were added.)
TYPES = {Q.Q2_K: (84, [80, 82], 256, 6), Q.Q3_K: (110, [108], 256, 6), Q.IQ4_NL: (18, [0], 32, 16),
         Q.MXFP4: (17, [], 32, 16)}
# MXFP4: the E8M0 exponents (byte 0) of its first random blocks.
MXFP4_EXPONENTS = [0, 1, 2, 3, 126, 127, 128, 253, 254, 255]


def blocks_for(qtype, rng) -> np.ndarray:
    size, half_offsets, _, n_random = TYPES[qtype]
    blocks = rng.integers(0, 256, size=(n_random + 2, size), dtype=np.uint8)
    blocks[n_random] = 0xFF
    blocks[n_random + 1] = 0
    for i in range(n_random + 2):
        for off in half_offsets:
            v = np.float16(rng.uniform(0.001, 0.05) * (1 if rng.integers(2) else -1))
            blocks[i, off:off + 2] = np.frombuffer(v.tobytes(), dtype=np.uint8)
    if qtype == Q.Q3_K:
        blocks[n_random + 1, 96:108] = rng.integers(0, 256, size=12, dtype=np.uint8)
    elif qtype == Q.Q2_K:
        blocks[n_random + 1, 0:16] = rng.integers(0, 256, size=16, dtype=np.uint8)
    elif qtype == Q.MXFP4:
        blocks[:len(MXFP4_EXPONENTS), 0] = MXFP4_EXPONENTS
        # The last random blocks: normal values at three magnitudes quantized by the package.
        n_q = n_random - len(MXFP4_EXPONENTS)
        values = rng.normal(size=(n_q, 32)) * np.array([1e-3, 1.0, 1e3] * n_q)[:n_q, None]
        blocks[len(MXFP4_EXPONENTS):n_random] = gguf.quants.quantize(values.astype(np.float32), qtype)
    return blocks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "kernels/fixtures/gguf_py_dequant.txt"))
    a = ap.parse_args()
    rng = np.random.default_rng(2311)
    lines = [f"# tests/reference/make_dequant_fixture.py, gguf {importlib.metadata.version('gguf')}"]
    for qtype in TYPES:
        blocks = blocks_for(qtype, rng)
        n_elems = TYPES[qtype][2]
        with np.errstate(over="ignore"):  # MXFP4 at e = 254, 255: +-inf, as ggml's float math gives
            values = gguf.quants.dequantize(blocks.reshape(-1), qtype).astype(np.float32).reshape(len(blocks), n_elems)
        lines.append(f"{qtype.name} {len(blocks)}")
        lines.append(blocks.tobytes().hex())
        for row in values:
            lines.append(" ".join(f"{int(u):08x}" for u in row.view(np.uint32)))
    Path(a.out).write_text("\n".join(lines) + "\n")
    print(a.out)


if __name__ == "__main__":
    main()
