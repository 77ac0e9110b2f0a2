#!/usr/bin/env python3
"""Where a forward pass spends its time, from a step-profiler trace.

Reads a Chrome trace written by `spate_bench --trace-dir DIR` (or by the
server's /start_profile ... /stop_profile) and prints, per op of the forward
(the "op" spans of the thread that runs the forward: embed, qkv_proj,
rope_kv_store, ...): its count, total wall time, share of all op time, mean time
per call in microseconds, and how busy the pool's workers were during it
(worker task time / op wall time; 1.0 per worker means no idle worker).

Usage: perf/scripts/op_breakdown.py TRACE.json [--top 20]
"""
import argparse
import json
import sys
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    with open(args.trace) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    op_wall = defaultdict(float)
    op_count = defaultdict(int)
    worker_busy = defaultdict(float)
    worker_tids = set()
    for e in events:
        if e.get("ph") != "X":
            continue
        if e.get("cat") == "op":
            op_wall[e["name"]] += e["dur"]
            op_count[e["name"]] += 1
        elif e.get("cat") == "worker":
            worker_busy[e["name"]] += e["dur"]
            worker_tids.add(e.get("tid"))
    total = sum(op_wall.values())
    if total <= 0:
        sys.exit(f"{args.trace}: no op spans (was the trace recorded while a forward ran?)")
    n_workers = max(1, len(worker_tids))
    print(f"{'op':<20} {'calls':>8} {'total ms':>10} {'share':>7} {'us/call':>9} {'worker busy':>12}")
    for name, wall in sorted(op_wall.items(), key=lambda kv: -kv[1])[: args.top]:
        busy = worker_busy.get(name, 0.0) / wall / n_workers if wall > 0 else 0.0
        print(f"{name:<20} {op_count[name]:>8} {wall / 1e3:>10.1f} {100 * wall / total:>6.1f}% "
              f"{wall / op_count[name]:>9.1f} {busy:>12.2f}")
    print(f"{'all ops':<20} {sum(op_count.values()):>8} {total / 1e3:>10.1f}  ({n_workers} worker thread(s) seen)")


if __name__ == "__main__":
    main()
