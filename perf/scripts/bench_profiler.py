#!/usr/bin/env python3
"""The step profiler's cost: one spate server started with
SPATE_PROFILER_ENABLED=true, a fixed batch of requests (--concurrency
streams of --max-tokens tokens, temperature 0) run with the profiler idle and
while it records (POST /start_profile ... /stop_profile), alternating --reps
times (idle first on odd reps). Reports the median generated tok/s of each
and their ratio, and the size of the traces.

"Idle" is the state of every server without the variable too: a span then
costs one relaxed atomic load, so idle also stands for "off".

Usage: perf/scripts/bench_profiler.py [--reps 5] [--concurrency 8] [--max-tokens 128] [--threads 2]
Env: SPATE_BIN, SPATE_MODEL.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from perflib import REPO, median  # noqa: E402

sys.path.insert(0, str(REPO / "tests" / "integration"))

from spate_server import MODEL_NAME, SpateServer, post_json  # noqa: E402


def run_batch(url, n, max_tokens):
    def one(i):
        st, body, _ = post_json(url, "/v1/completions", {"model": MODEL_NAME, "prompt": f"Story {i}: once upon a time",
                                                         "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True})
        assert st == 200, body
        return body["usage"]["completion_tokens"]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(n) as pool:
        tokens = sum(pool.map(one, range(n)))
    return tokens / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    trace_dir = tempfile.mkdtemp(prefix="spate-prof-")
    srv = SpateServer(env={"SPATE_PROFILER_ENABLED": "true", "SPATE_PROFILER_DIR": trace_dir}, threads=args.threads).wait_ready()
    try:
        run_batch(srv.base_url, args.concurrency, 16)  # warm the caches
        idle, rec, sizes, events = [], [], [], []
        for rep in range(args.reps):
            for mode in (("idle", "rec") if rep % 2 == 0 else ("rec", "idle")):
                if mode == "idle":
                    idle.append(run_batch(srv.base_url, args.concurrency, args.max_tokens))
                    continue
                assert post_json(srv.base_url, "/start_profile", None, raw=b"")[0] == 200
                rec.append(run_batch(srv.base_url, args.concurrency, args.max_tokens))
                st, body, _ = post_json(srv.base_url, "/stop_profile", None, raw=b"")
                assert st == 200, body
                sizes.append(os.path.getsize(body["path"]))
                events.append(body["n_events"])
                os.remove(body["path"])
        res = {"kind": "profiler_overhead", "reps": args.reps, "concurrency": args.concurrency, "max_tokens": args.max_tokens,
               "threads": args.threads, "idle_tok_s": median(idle), "recording_tok_s": median(rec),
               "recording_over_idle": median(rec) / median(idle),
               "trace_bytes_median": median(sizes), "trace_events_median": median(events),
               "idle_all": [round(x, 1) for x in idle], "recording_all": [round(x, 1) for x in rec]}
        print(json.dumps(res))
    finally:
        srv.stop()
        subprocess.run(["rm", "-rf", trace_dir], check=False)


if __name__ == "__main__":
    main()
