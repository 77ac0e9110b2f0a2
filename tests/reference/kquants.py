"""Q4_K and Q6_K encoders in numpy, for the random-weight models of
make_random_models.py (the PyPI `gguf` package decodes K-quants but does not
encode them).

The encodings are plain (one pass, no search for the best scales, unlike
llama.cpp's quantizer) but valid: any engine decodes exactly the same values
from them, which is all a reference comparison needs. Each encoder checks
itself against gguf's decoder (`gguf.quants.dequantize`) and raises when the
round trip is off by more than a format's step allows.

Input: float32 array whose last axis is a multiple of 256 (QK_K); output:
uint8 array of the same shape but the last axis in bytes (144 per 256 values
for Q4_K, 210 for Q6_K), as gguf.GGUFWriter.add_tensor(raw_dtype=...) takes.
"""
from __future__ import annotations

import numpy as np
import gguf

QK_K = 256


def _f16(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16)


def _blocks(x: np.ndarray) -> np.ndarray:
    if x.shape[-1] % QK_K:
        raise ValueError(f"last axis {x.shape[-1]} is not a multiple of {QK_K}")
    return x.astype(np.float32).reshape(-1, QK_K)


def quantize_q4_k(x: np.ndarray) -> np.ndarray:
    """y = d * sc[j] * q - dmin * m[j] over 8 sub-blocks of 32, q in 0..15, sc and m 6-bit."""
    b = _blocks(x)
    n = b.shape[0]
    sub = b.reshape(n, 8, 32)
    mins = np.maximum(0.0, -sub.min(axis=2))                      # >= 0: y = ... - m
    scales = (sub.max(axis=2) + mins) / 15.0
    d = _f16(scales.max(axis=1) / 63.0)
    dmin = _f16(mins.max(axis=1) / 63.0)
    df, dminf = d.astype(np.float32)[:, None], dmin.astype(np.float32)[:, None]
    sc = np.where(df > 0, np.clip(np.ceil(scales / np.where(df > 0, df, 1)), 0, 63), 0).astype(np.uint8)
    mn = np.where(dminf > 0, np.clip(np.round(mins / np.where(dminf > 0, dminf, 1)), 0, 63), 0).astype(np.uint8)
    step = (df * sc)[:, :, None]
    q = np.where(step > 0, np.round((sub + (dminf * mn)[:, :, None]) / np.where(step > 0, step, 1)), 0)
    q = np.clip(q, 0, 15).astype(np.uint8)
    packed = np.empty((n, 12), np.uint8)
    packed[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    packed[:, 4:8] = mn[:, 0:4] | ((mn[:, 4:8] >> 4) << 6)
    packed[:, 8:12] = (sc[:, 4:8] & 0x0F) | ((mn[:, 4:8] & 0x0F) << 4)
    qs = (q[:, 0::2, :] | (q[:, 1::2, :] << 4)).reshape(n, 128)
    out = np.concatenate([d.view(np.uint8).reshape(n, 2), dmin.view(np.uint8).reshape(n, 2), packed, qs], axis=1)
    return _checked(x, out, gguf.GGMLQuantizationType.Q4_K, 144)


def quantize_q6_k(x: np.ndarray) -> np.ndarray:
    """y = d * scale[g] * q over 16 groups of 16, q in -32..31, scale int8."""
    b = _blocks(x)
    n = b.shape[0]
    grp = b.reshape(n, 16, 16)
    gscale = np.abs(grp).max(axis=2) / 31.0
    d = _f16(gscale.max(axis=1) / 127.0)
    df = d.astype(np.float32)[:, None]
    sc = np.where(df > 0, np.clip(np.ceil(gscale / np.where(df > 0, df, 1)), 0, 127), 0).astype(np.int8)
    step = (df * sc)[:, :, None]
    q = np.where(step > 0, np.round(grp / np.where(step > 0, step, 1)), 0)
    q = (np.clip(q, -32, 31).astype(np.int16) + 32).astype(np.uint8).reshape(n, QK_K)
    # element e: half h = e // 128; its low nibble is ql[h*64 + e%64] >> (4 * ((e%128) // 64)),
    # its high two bits qh[h*32 + e%32] >> (2 * ((e%128) // 32))
    lo, hi = q & 0x0F, q >> 4
    ql = np.empty((n, 128), np.uint8)
    qh = np.zeros((n, 64), np.uint8)
    for h in range(2):
        e = lo[:, h * 128:(h + 1) * 128]
        ql[:, h * 64:(h + 1) * 64] = e[:, 0:64] | (e[:, 64:128] << 4)
        t = hi[:, h * 128:(h + 1) * 128]
        for s in range(4):
            qh[:, h * 32:(h + 1) * 32] |= t[:, s * 32:(s + 1) * 32] << (2 * s)
    out = np.concatenate([ql, qh, sc.view(np.uint8), d.view(np.uint8).reshape(n, 2)], axis=1)
    return _checked(x, out, gguf.GGMLQuantizationType.Q6_K, 210)


def _checked(x: np.ndarray, blocks: np.ndarray, qtype, block_bytes: int) -> np.ndarray:
    assert blocks.shape[1] == block_bytes
    raw = blocks.reshape(*x.shape[:-1], x.shape[-1] // QK_K * block_bytes)
    back = gguf.quants.dequantize(raw, qtype).reshape(x.shape)
    err = np.sqrt(np.mean((back - x) ** 2)) / max(float(np.sqrt(np.mean(x.astype(np.float64) ** 2))), 1e-30)
    limit = {gguf.GGMLQuantizationType.Q4_K: 0.12, gguf.GGMLQuantizationType.Q6_K: 0.04}[qtype]
    if not err <= limit:
        raise AssertionError(f"{qtype.name} round trip: relative RMS error {err:.4f} > {limit}")
    return raw
