#!/usr/bin/env python3
"""Fleet benchmark: spate replicas behind HAProxy (deploy/haproxy/haproxy.cfg)
on loopback, with the harness of tests/integration/fleet.py.

1. Affinity: --conversations two-turn chats (the second turn repeats the
   first turn and its answer). Prefix-cache hit rate of the second turns
   (hits / queries of spate:prefix_cache_* summed over the replicas, counted
   over the second-turn phase only) and their median TTFT, through the
   balancer as shipped (consistent hash on X-Session-Id) and with the hash
   line replaced by "balance roundrobin" (no affinity).
2. Scaling: the same streaming workload (--clients concurrent chat streams for
   --seconds) through the balancer with 1, 2 and 3 replicas of --threads
   threads each: generated tok/s, TTFT p50 and p90, requests finished.
   This machine's cores bound it: with 2 cores, 3 replicas of 1 thread share
   2 cores, so the figures show the balancer's overhead and behaviour, not
   capacity a fleet of real machines would add.

Usage: perf/scripts/bench_fleet.py [--conversations 24] [--clients 8] [--seconds 20]
                           [--threads 1] [--out FILE.jsonl]
Env: SPATE_BIN, SPATE_MODEL as for the tests.
"""
import argparse
import json
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

from perflib import REPO, median  # noqa: E402

sys.path.insert(0, str(REPO / "tests" / "integration"))

from fleet import HAPROXY_CFG, Fleet  # noqa: E402
from fleet_client import chat_stream  # noqa: E402

ENV = {"SPATE_SKIP_WARMUP": "1"}


def roundrobin_cfg():
    text = HAPROXY_CFG.read_text()
    assert "balance hash var(txn.conversation)" in text
    f = tempfile.NamedTemporaryFile("w", prefix="haproxy-rr-", suffix=".cfg", delete=False)
    f.write(text.replace("balance hash var(txn.conversation)", "balance roundrobin"))
    f.close()
    return f.name


WORDS = ("lighthouse keeper river mountain garden winter harbor forest engine library market bridge island "
         "violin tower meadow desert comet orchard canyon lantern compass glacier village").split()


def first_turn(s):
    """A long first turn that shares no prefix with another conversation's (beyond the chat template)."""
    rng = random.Random(s)
    words = " ".join(rng.choice(WORDS) for _ in range(250))
    return f"{rng.choice(WORDS).title()} {s}: tell me a long story using these words: {words}."


def affinity_run(cfg, n_conv, threads, label):
    fleet = Fleet(3, [], ENV, haproxy_cfg=cfg, threads=threads)
    try:
        firsts = []
        for s in range(n_conv):
            msgs = [{"role": "user", "content": first_turn(s)}]
            a = chat_stream(fleet.url, f"conv-{s}", msgs, max_tokens=16)
            assert a.result == "ok", a
            firsts.append((msgs, a))
        h0, q0 = fleet.metric_sum("spate:prefix_cache_hits_total"), fleet.metric_sum("spate:prefix_cache_queries_total")
        ttfts, same = [], 0
        # Second turns in another order than the first (a fixed shuffle), so that
        # round robin does not send them where the first turns went by accident.
        order = list(range(n_conv))
        random.Random(7).shuffle(order)
        for s in order:
            msgs, a = firsts[s]
            m2 = msgs + [{"role": "assistant", "content": a.detail}, {"role": "user", "content": "What happened next?"}]
            b = chat_stream(fleet.url, f"conv-{s}", m2, max_tokens=16)
            assert b.result == "ok", b
            ttfts.append(b.ttft_s)
            same += b.replica == a.replica
        h1, q1 = fleet.metric_sum("spate:prefix_cache_hits_total"), fleet.metric_sum("spate:prefix_cache_queries_total")
        return {"kind": "affinity", "balance": label, "conversations": n_conv, "second_turn_hit_rate": (h1 - h0) / max(q1 - q0, 1),
                "second_turn_same_replica": same / n_conv, "second_turn_ttft_p50_s": median(ttfts)}
    finally:
        fleet.stop()


def scaling_run(n, clients, seconds, threads):
    fleet = Fleet(n, [], ENV, threads=threads)
    try:
        outcomes, lock, stop = [], threading.Lock(), threading.Event()

        def client(c):
            i = 0
            while not stop.is_set():
                o = chat_stream(fleet.url, f"c{c}-{i}", [{"role": "user", "content": f"Write a short poem about the number {i + c}."}],
                                max_tokens=48)
                with lock:
                    outcomes.append(o)
                i += 1

        ts = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
        t0 = time.monotonic()
        for t in ts:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in ts:
            t.join(timeout=120)
        elapsed = time.monotonic() - t0
        ok = [o for o in outcomes if o.result == "ok"]
        ttfts = sorted(o.ttft_s for o in ok if o.ttft_s is not None)
        return {"kind": "scaling", "replicas": n, "threads_per_replica": threads, "clients": clients, "seconds": round(elapsed, 2),
                "requests_ok": len(ok), "requests_failed": len(outcomes) - len(ok),
                "tok_s": sum(o.n_tokens for o in ok) / elapsed,
                "ttft_p50_s": ttfts[len(ttfts) // 2] if ttfts else None,
                "ttft_p90_s": ttfts[int(len(ttfts) * 0.9)] if ttfts else None}
    finally:
        fleet.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conversations", type=int, default=24)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(Path.home() / f".cache/spate/bench/fleet-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"))
    args = ap.parse_args()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    rows = []
    with open(args.out, "w") as out:
        def emit(r):
            rows.append(r)
            print(json.dumps(r), file=out, flush=True)
            print(json.dumps(r))
        emit(affinity_run(str(HAPROXY_CFG), args.conversations, args.threads, "hash (X-Session-Id)"))
        emit(affinity_run(roundrobin_cfg(), args.conversations, args.threads, "roundrobin"))
        for n in (1, 2, 3):
            emit(scaling_run(n, args.clients, args.seconds, args.threads))
    print(f"# results: {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
