#!/usr/bin/env python3
"""Expected YaRN rotary cos/sin for tests/kernels/test_rope_yarn.cpp.

Follows ggml's formulas, written out independently of spate's C++:
  ggml/src/ggml.c          ggml_rope_yarn_corr_dim(s)   (float, floor/ceil, clamped to [0, n_dims-1])
  ggml/src/ggml-cpu/ops.cpp rope_yarn_ramp, rope_yarn    (ramp mix, mscale *= 1 + 0.1 ln(1/freq_scale))
  src/llama-context.cpp    yarn_attn_factor             (get_mscale(factor, 1) / (1 + 0.1 ln factor))
The scalar parameters are computed in float32 as ggml does; theta, its ramp mix
and cos/sin in float64 (spate's rope_angles_yarn evaluates theta in double; ggml's
own float recurrence theta *= theta_scale is printed for comparison with --ggml).
Prints the C++ table of the gpt-oss-20b configuration (n_rot 64, base 150000,
factor 32, n_ctx_orig 4096) at positions 0, 1, 4095, 100000.
"""
import math
import sys

import numpy as np

f32 = np.float32


def corr_dim(n_dims, n_ctx_orig, beta, base):
    return f32(n_dims) * np.log(f32(n_ctx_orig) / (f32(beta) * f32(2) * f32(math.pi))) / (f32(2) * np.log(f32(base)))


def yarn_params(n_rot, factor, n_ctx_orig, base, beta_fast=32.0, beta_slow=1.0):
    freq_scale = f32(1) / f32(factor)
    low = max(f32(0), np.floor(corr_dim(n_rot, n_ctx_orig, beta_fast, base)))
    high = min(f32(n_rot - 1), np.ceil(corr_dim(n_rot, n_ctx_orig, beta_slow, base)))
    fac = f32(1) / freq_scale
    get_mscale = f32(1) if fac <= 1 else f32(0.1) * f32(1) * np.log(fac) + f32(1)
    attn_factor = get_mscale * (f32(1) / (f32(1) + f32(0.1) * np.log(fac)))
    return dict(freq_scale=freq_scale, ext_factor=f32(1), attn_factor=f32(attn_factor), low=f32(low), high=f32(high))


def angles(n_rot, pos, base, y):
    """cos | sin (float32) of theta in float64, as spate's rope_angles_yarn."""
    mscale = f32(y["attn_factor"]) * (f32(1) + f32(0.1) * np.log(f32(1) / y["freq_scale"]))
    half = n_rot // 2
    out = np.zeros(n_rot, dtype=np.float32)
    for i in range(half):
        extrap = pos * float(base) ** (-2.0 * i / n_rot)
        interp = float(y["freq_scale"]) * extrap
        ramp = 1.0 - min(1.0, max(0.0, (i - float(y["low"])) / max(0.001, float(y["high"]) - float(y["low"]))))
        mix = ramp * float(y["ext_factor"])
        theta = interp * (1 - mix) + extrap * mix
        out[i] = math.cos(theta) * float(mscale)
        out[half + i] = math.sin(theta) * float(mscale)
    return out


def angles_ggml(n_rot, pos, base, y):
    """ggml's float32 rope cache (theta *= theta_scale), for comparison."""
    mscale = f32(y["attn_factor"]) * (f32(1) + f32(0.1) * np.log(f32(1) / y["freq_scale"]))
    theta_scale = f32(base) ** (f32(-2) / f32(n_rot))
    theta = f32(pos)
    half = n_rot // 2
    out = np.zeros(n_rot, dtype=np.float32)
    for i in range(half):
        ti = y["freq_scale"] * theta
        ramp = f32(1) - min(f32(1), max(f32(0), (f32(i) - y["low"]) / max(f32(0.001), y["high"] - y["low"])))
        mix = ramp * y["ext_factor"]
        t = ti * (f32(1) - mix) + theta * mix
        out[i] = f32(np.cos(t)) * mscale
        out[half + i] = f32(np.sin(t)) * mscale
        theta = theta * theta_scale
    return out


def c_float(v):
    """A C++ float literal that reads back as v."""
    t = f"{v:.9g}"
    return (t if any(ch in t for ch in ".en") else t + ".0") + "f"


def main():
    n_rot, base, factor, n_ctx_orig = 64, 150000.0, 32.0, 4096
    y = yarn_params(n_rot, factor, n_ctx_orig, base)
    print(f"// corr_low {y['low']:g}, corr_high {y['high']:g}, attn_factor {y['attn_factor']:.9g}")
    for pos in (0, 1, 4095, 100000):
        a = angles(n_rot, pos, base, y)
        if "--ggml" in sys.argv:
            g = angles_ggml(n_rot, pos, base, y)
            print(f"// pos {pos}: max |spate - ggml float recurrence| = {np.max(np.abs(a - g)):.3g}")
        print(f"    {{{pos}, {{")
        for r in range(0, n_rot, 6):
            print("      " + " ".join(f"{c_float(v)}," for v in a[r:r + 6]))
        print("    }},")


if __name__ == "__main__":
    main()
