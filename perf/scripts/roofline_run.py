#!/usr/bin/env python3
"""spate's figures as shares of rooflines probed in the same minutes (issue 14).

A shared VM's read bandwidth moves with its neighbours (30 to 54 GB/s within
one session here), so a share computed with a probe taken at another time
says little. This script interleaves, per round and model:

    probe -> pp512 -> probe -> tg128 -> probe -> bd16 -> probe

(each figure its own spate_bench run, so the probes sit seconds from it) and
divides each figure by the mean of the two probes around it
(roofline_share.shares_of). The bandwidth here can also jump between two
levels within seconds; a figure whose two probes differ by more than
--max-drift (of their mean; read bandwidth for tg128, the int8 peak for the
others) is marked "unsteady" and left out of the median, since its roofline is
not known. It prints every figure and the median share per figure over the
steady ones (and over all), and one JSON line at the end.

--isa avx2 runs spate_bench with SPATE_MAX_ISA=avx2 and divides by the avx2
rooflines (roofline_share.py --isa): on an AVX-512 CPU that is the kernels
capped at AVX2, not an AVX2 CPU; say which.

Usage: roofline_run.py --model GGUF [--model GGUF ...] [--rounds 3]
       [--reps 3] [--threads 2] [--build-dir build] [--max-drift 0.1] [--isa avx2|avx512]
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perflib import json_objects, median  # noqa: E402
from roofline_share import int8_peak_of, shares_of, work_per_token  # noqa: E402

PROBE_KEYS = ("read_gb_s", "int8_maddubs_gmac_s", "int8_vnni_gmac_s", "int8_vnni_block2_gmac_s",
              "int8_vnni_block3_gmac_s", "int8_maddubs_block2_gmac_s", "int8_maddubs_block3_gmac_s",
              "fp32_fma_gmac_s", "fp32_fma512_gmac_s")


def run_json_lines(cmd, timeout_s, env=None):
    return json_objects(subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=timeout_s,
                                       env=env).stdout)


def probe(build_dir, threads, timeout_s):
    return run_json_lines([f"{build_dir}/perf/roofline_probe", "--threads", str(threads), "--reps", "3", "--json"],
                          timeout_s)[-1]


def mean_probe(a, b):
    return {k: (a.get(k, 0.0) + b.get(k, 0.0)) / 2 for k in PROBE_KEYS}


def bench(build_dir, model, threads, reps, only, timeout_s, isa):
    env = dict(os.environ, SPATE_MAX_ISA=isa)
    lines = run_json_lines([f"{build_dir}/perf/spate_bench", "--model", model, "--threads", str(threads),
                            "--reps", str(reps), "--only", only], timeout_s, env)
    return {d["metric"]: d["tok_s"] for d in lines if "metric" in d}


FIGURES = (("pp", "pp512", "int8"), ("tg", "tg128", "read_gb_s"), ("bd", "bd16", "int8"))


def probe_level(p, key, isa):
    """The roofline a figure is divided by: read bandwidth, or the int8 peak at the level."""
    return p["read_gb_s"] if key == "read_gb_s" else int8_peak_of(p, isa)


def measure_round(a, model, w):
    """One round: every figure between two probes. Returns {figure: record}."""
    out = {}
    before = probe(a.build_dir, a.threads, a.timeout)
    for only, name, key in FIGURES:
        figs = bench(a.build_dir, model, a.threads, a.reps, only, a.timeout, a.isa)
        after = probe(a.build_dir, a.threads, a.timeout)
        lo, hi = probe_level(before, key, a.isa), probe_level(after, key, a.isa)
        drift = abs(hi - lo) / ((hi + lo) / 2)
        p = mean_probe(before, after)
        sh = shares_of(w, p, **{name: figs.get(name)}, isa=a.isa)
        out[name] = {"tok_s": figs.get(name), "probe": p, "probes": [lo, hi], "drift": drift,
                     "steady": drift <= a.max_drift, "shares": sh}
        before = after
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per command")
    ap.add_argument("--isa", choices=("avx2", "avx512"), default="avx512",
                    help="avx2: spate_bench with SPATE_MAX_ISA=avx2, shares of the avx2 rooflines")
    ap.add_argument("--max-drift", type=float, default=0.1,
                    help="largest relative difference of a figure's two probes for it to count")
    a = ap.parse_args()
    result = []
    for model in a.model:
        w = work_per_token(model)
        rounds = []
        for i in range(a.rounds):
            r = measure_round(a, model, w)
            rounds.append(r)
            for name, rec in r.items():
                print(f"{os.path.basename(model)} round {i + 1} {name}: {rec['tok_s']:.1f} tok/s | probes "
                      f"{rec['probes'][0]:.1f}/{rec['probes'][1]:.1f} ({'steady' if rec['steady'] else 'unsteady'}) | "
                      + ", ".join(f"{k} {100 * v:.1f}%" for k, v in rec["shares"].items()), flush=True)
        summary = {}
        for _, name, _ in FIGURES:
            recs = [r[name] for r in rounds]
            steady = [x for x in recs if x["steady"]]
            entry = {"median_tok_s": median(x["tok_s"] for x in recs), "n_steady": len(steady)}
            for k in recs[0]["shares"]:
                entry[f"{k}_all"] = median(x["shares"][k] for x in recs)
                if steady:
                    entry[f"{k}_steady"] = median(x["shares"][k] for x in steady)
            summary[name] = entry
            print(f"{os.path.basename(model)} {name}: median {entry['median_tok_s']:.1f} tok/s | "
                  + ", ".join(f"{k} {100 * v:.1f}%" for k, v in entry.items() if k != "n_steady" and k.endswith(("_all", "_steady")))
                  + f" ({len(steady)} of {len(recs)} steady)", flush=True)
        result.append({"model": model, "work": w, "rounds": rounds, "summary": summary})
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
