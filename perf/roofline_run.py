#!/usr/bin/env python3
"""spate's figures as shares of rooflines probed in the same minutes (issue 14).

A shared VM's read bandwidth moves with its neighbours (30 to 54 GB/s within
one session here), so a share computed with a probe taken at another time
says little. This script interleaves, per round and model:

    roofline_probe  ->  spate_bench (pp512, tg128, bd16)  ->  roofline_probe

and divides each round's figures by the mean of the two probes around them
(roofline_share.shares_of). It prints every round and the median share per
figure, and one JSON line at the end.

Usage: roofline_run.py --model GGUF [--model GGUF ...] [--rounds 3]
       [--reps 3] [--threads 2] [--build-dir build]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from roofline_share import shares_of, work_per_token  # noqa: E402

PROBE_KEYS = ("read_gb_s", "int8_maddubs_gmac_s", "int8_vnni_gmac_s", "fp32_fma_gmac_s", "fp32_fma512_gmac_s")


def run_json_lines(cmd, timeout_s):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=timeout_s).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def probe(build_dir, threads, timeout_s):
    return run_json_lines([f"{build_dir}/perf/roofline_probe", "--threads", str(threads), "--reps", "3", "--json"],
                          timeout_s)[-1]


def mean_probe(a, b):
    return {k: (a.get(k, 0.0) + b.get(k, 0.0)) / 2 for k in PROBE_KEYS}


def bench(build_dir, model, threads, reps, timeout_s):
    lines = run_json_lines([f"{build_dir}/perf/spate_bench", "--model", model, "--threads", str(threads),
                            "--reps", str(reps)], timeout_s)
    return {d["metric"]: d["tok_s"] for d in lines if "metric" in d}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per command")
    a = ap.parse_args()
    result = []
    for model in a.model:
        w = work_per_token(model)
        rounds = []
        for i in range(a.rounds):
            before = probe(a.build_dir, a.threads, a.timeout)
            figs = bench(a.build_dir, model, a.threads, a.reps, a.timeout)
            after = probe(a.build_dir, a.threads, a.timeout)
            p = mean_probe(before, after)
            sh = shares_of(w, p, figs.get("tg128"), figs.get("pp512"), figs.get("bd16"))
            rounds.append({"probe": p, "tok_s": figs, "shares": sh})
            print(f"{os.path.basename(model)} round {i + 1}: read {before['read_gb_s']:.1f}/{after['read_gb_s']:.1f} GB/s, "
                  f"int8 {p['int8_vnni_gmac_s'] or p['int8_maddubs_gmac_s']:.0f} GMAC/s | "
                  + ", ".join(f"{k} {v:.1f}" for k, v in figs.items()) + " | "
                  + ", ".join(f"{k} {100 * v:.1f}%" for k, v in sh.items()), flush=True)
        med = {k: statistics.median(r["shares"][k] for r in rounds) for k in rounds[0]["shares"]}
        med_tok = {k: statistics.median(r["tok_s"][k] for r in rounds) for k in rounds[0]["tok_s"]}
        print(f"{os.path.basename(model)} median of {a.rounds}: "
              + ", ".join(f"{k} {v:.1f} tok/s" for k, v in med_tok.items()) + " | "
              + ", ".join(f"{k} {100 * v:.1f}%" for k, v in med.items()), flush=True)
        result.append({"model": model, "work": w, "rounds": rounds, "median_shares": med, "median_tok_s": med_tok})
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
