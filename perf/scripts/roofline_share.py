#!/usr/bin/env python3
"""Share of the machine's rooflines reached by a model's throughput figures
(issue 14). The rooflines come from build/perf/roofline_probe --json; the
per-token work from the GGUF's matmul weights:

  bytes per token  every matmul weight is read once per batch-1 decode step
                   (the output projection too: token_embd when tied);
                   embeddings, norms and the KV cache are left out (small).
                   Mixture of experts: the router (ffn_gate_inp) whole, each
                   *_exps tensor's expert_used_count / expert_count share (the
                   active experts' bytes), shared experts whole; MACs alike.
                   "embd_row_bytes": one token_embd row (bench_moe.sh adds it)
  MACs per token   one multiply-add per matmul weight element, plus attention
                   (2 x n_layer x q_dim x context, at the benchmark's context);
                   pp512 computes the output projection for its last token only

  batch-1 decode:        tok/s x bytes per token / read bandwidth
  prefill, batched decode: tok/s x MACs per token / int8 multiply-add peak
  (*_mixed, also printed: tok/s x (matmul MACs / int8 peak + attention MACs /
  fp32 FMA peak, the higher of 256- and 512-bit), the time roofline of the
  instructions the step needs)
(the int8 peak: spate and llama.cpp run these matmuls on 8-bit activations; it
is the higher of the probe's 256-bit vpmaddubsw and, where the CPU has it,
512-bit VNNI vpdpbusd figures, the instructions spate's kernels use).
  (*_kernel, where the probe measured the block mixes: each weight type's
  MACs at the rate of its own per-block instruction mix, roofline_probe's
  "+ 2 fp ops / 8" for Q8_0, Q4_0, Q5_0, IQ4_NL and "+ 3" for every other
  quantized type (a bound from above for Q6_K, Q3_K and Q2_K, which issue more),
  attention at the fp32 peak: the ceiling no kernel of these formats can pass
  on this machine, as the int8 peak counts the multiplies alone.)
--isa avx2: the figures were measured with the kernels capped at AVX2
(SPATE_MAX_ISA=avx2, or an AVX2-only CPU): the int8 peak is vpmaddubsw's, the
block mixes the avx2 ones (int8_maddubs_block*), the fp32 peak the 256-bit FMA.
Default (avx512): the highest the probe found, as before.

Usage: roofline_share.py --model GGUF --probe PROBE.json [--tg128 T] [--pp512 P] [--bd16 B]
       [--label NAME] [--isa avx2|avx512] (figures in tok/s; prints one line per figure, and a JSON line)
"""
import argparse
import json
import sys

import gguf

MATMUL_SUFFIXES = ("attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_qkv.weight", "attn_output.weight",
                   "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight", "ffn_gate_inp.weight",
                   "ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight")
EXPERT_SUFFIXES = ("ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight")


def work_per_token(path):
    r = gguf.GGUFReader(path)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()

    def meta(key, default=None):
        f = r.fields.get(f"{arch}.{key}")
        return default if f is None else int(f.parts[-1][0])

    n_bytes = n_macs = 0
    by_type = {}
    tensors = {t.name: t for t in r.tensors}
    n_expert, n_used = meta("expert_count", 0), meta("expert_used_count", 0)
    for t in r.tensors:
        if not t.name.startswith("blk."):
            continue
        if t.name.endswith(MATMUL_SUFFIXES):
            num, den = 1, 1
        elif t.name.endswith(EXPERT_SUFFIXES) and n_expert:
            num, den = n_used, n_expert  # the active experts' share
        else:
            continue
        n_bytes += int(t.n_bytes) * num // den
        n_macs += int(t.n_elements) * num // den
        by_type[t.tensor_type.name] = by_type.get(t.tensor_type.name, 0) + int(t.n_elements) * num // den
    out = tensors.get("output.weight") or tensors["token_embd.weight"]
    embd = tensors["token_embd.weight"]
    n_embd, n_head = meta("embedding_length"), meta("attention.head_count")
    head_dim = meta("attention.key_length", n_embd // n_head)
    return {"arch": arch, "bytes": n_bytes + int(out.n_bytes), "layer_macs": n_macs, "out_macs": int(out.n_elements),
            "macs": n_macs + int(out.n_elements), "n_layer": meta("block_count"), "q_dim": n_head * head_dim,
            "layer_macs_by_type": by_type, "out_type": out.tensor_type.name, "n_expert": n_expert,
            "n_expert_used": n_used, "embd_row_bytes": int(embd.n_bytes) // int(embd.shape[-1])}


# Weight types whose block mix is roofline_probe's "+ 2 fp ops / 8" (one multiply, one FMA).
BLOCK2_TYPES = ("Q8_0", "Q4_0", "Q5_0", "IQ4_NL")


def int8_peak_of(probe, isa="avx512"):
    """GMAC/s of the int8 peak at an ISA level: vpmaddubsw at avx2, else the higher of it and vpdpbusd."""
    if isa == "avx2":
        return probe["int8_maddubs_gmac_s"]
    return max(probe["int8_maddubs_gmac_s"], probe.get("int8_vnni_gmac_s", -1.0))


def kernel_seconds(w, probe, n_out_rows, isa="avx512"):
    """Seconds per token of the matmuls at their types' block-mix ceilings (None: not probed).

    n_out_rows: the share of tokens that run the output projection (pp512: 1/512).
    isa: avx2 uses the avx2 mixes; avx512 the VNNI ones."""
    mix = "maddubs" if isa == "avx2" else "vnni"
    b2, b3 = probe.get(f"int8_{mix}_block2_gmac_s", -1.0), probe.get(f"int8_{mix}_block3_gmac_s", -1.0)
    if b2 <= 0 or b3 <= 0:
        return None
    rate = lambda t: (b2 if t in BLOCK2_TYPES else b3) * 1e9
    sec = sum(m / rate(t) for t, m in w["layer_macs_by_type"].items())
    return sec + n_out_rows * w["out_macs"] / rate(w["out_type"])


def shares_of(w, probe, tg128=None, pp512=None, bd16=None, isa="avx512"):
    """Shares of the rooflines for the given tok/s figures (None: not measured).

    *_compute: every multiply-add against the int8 peak (strict: attention too).
    *_mixed:   the time roofline of the step's own instructions: matmul MACs at
               the int8 peak plus attention's fp32 MACs at the fp32 FMA peak
               (attention runs in fp32 in spate and in llama.cpp alike).
    *_kernel:  as *_mixed, with each weight type's MACs at its block mix's
               ceiling (kernel_seconds); only where the probe measured it.
    """
    attn = lambda ctx: 2 * w["n_layer"] * w["q_dim"] * ctx  # QK^T and PV multiply-adds per token
    int8_peak = int8_peak_of(probe, isa) * 1e9
    fp32_peak = (probe["fp32_fma_gmac_s"] if isa == "avx2"
                 else max(probe["fp32_fma_gmac_s"], probe.get("fp32_fma512_gmac_s", -1.0))) * 1e9
    out = {}
    if tg128:  # decode from an empty cache to 128: mean context 64
        out["tg128_bandwidth"] = tg128 * w["bytes"] / (probe["read_gb_s"] * 1e9)
    if pp512:  # one 512-token prompt: mean context 256; logits (the output projection) for its last token only
        matmul = w["layer_macs"] + w["out_macs"] / 512
        out["pp512_compute"] = pp512 * (matmul + attn(256)) / int8_peak
        out["pp512_mixed"] = pp512 * (matmul / int8_peak + attn(256) / fp32_peak)
        k = kernel_seconds(w, probe, 1 / 512, isa)
        if k is not None:
            out["pp512_kernel"] = pp512 * (k + attn(256) / fp32_peak)
    if bd16:  # 16 sequences, 32 prompt + 64 generated: mean context 64
        out["bd16_compute"] = bd16 * (w["macs"] + attn(64)) / int8_peak
        out["bd16_mixed"] = bd16 * (w["macs"] / int8_peak + attn(64) / fp32_peak)
        k = kernel_seconds(w, probe, 1, isa)
        if k is not None:
            out["bd16_kernel"] = bd16 * (k + attn(64) / fp32_peak)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--label", default="")
    ap.add_argument("--isa", choices=("avx2", "avx512"), default="avx512", help="the level the figures ran at")
    for name in ("tg128", "pp512", "bd16"):
        ap.add_argument(f"--{name}", type=float)
    a = ap.parse_args()
    probe = json.load(open(a.probe))
    w = work_per_token(a.model)
    shares = shares_of(w, probe, a.tg128, a.pp512, a.bd16, a.isa)
    for k, v in shares.items():
        print(f"{a.label or w['arch']:>16} {k:18s} {100 * v:6.1f}% of the roofline")
    print(f"{a.label or w['arch']:>16} {'per token':18s} {w['bytes'] / 1e6:.1f} MB read, {w['macs'] / 1e6:.1f} M MACs (matmuls)")
    print(json.dumps({"label": a.label, "model": a.model, "work": w, "probe": probe, "shares": shares}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
