#!/usr/bin/env python3
"""How JSON answers end at a fixed max_tokens: the structured-output corpus
(tests/integration/schemas/*.json, response_format json_schema) and free
`json_object` prompts, sampled, against one or more spate binaries in the same
run (e.g. two builds, or one build with different serve arguments).

Per binary and set: the share of answers ended by `length` (cut) rather than
`stop`, mean completion tokens, the share of whitespace bytes, the longest
whitespace run, and json_object answers with a key twice in one object.

Usage:
  perf/scripts/bench_json_endings.py --bin NAME=PATH[::SERVE ARGS] [--bin ...] [--seeds 8] [--max-tokens 200]
                             [--temperature 0.7] [--model GGUF] [--out FILE]
Example (before/after a grammar change, same model, same run):
  perf/scripts/bench_json_endings.py --bin old=/work/wt-old/build/spate --bin new=build/spate
Servers run one at a time on a loopback port (spate serve --threads 2, warmup
skipped: only outputs are compared, never timings). Output: one JSON line per
(binary, set) to --out (default stdout) and a table on stderr.
"""

import argparse
import json
import os
import re
import shlex
import sys
import urllib.error
import urllib.request

from perflib import DEFAULT_MODEL, REPO, Server

OBJECT_PROMPTS = [
    "Return a JSON object about a cat.", "Return a JSON object describing a city.",
    "Describe a book as a JSON object.", "Return a JSON object about your favourite meal.",
    "Give a JSON object describing a car.", "Return a JSON object with facts about the moon.",
]


def post(url, body, timeout=600):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:  # a 400 (say, a keyword an older build refuses) is a row of its own
        return json.loads(e.read())


def repeated_key(text):
    """True when some object of the (complete) JSON text has a key twice."""
    found = []

    def hook(pairs):
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            found.append(keys)
        return dict(pairs)

    try:
        json.loads(text, object_pairs_hook=hook)
    except ValueError:
        return False
    return bool(found)


def cases():
    corpus = []
    for path in sorted((REPO / "tests/integration/schemas").glob("*.json")):
        case = json.loads(path.read_text())
        fmt = {"type": "json_schema", "json_schema": {"name": path.stem, "schema": case["schema"], "strict": True}}
        corpus.append((case["prompt"], fmt))
    objects = [(p, {"type": "json_object"}) for p in OBJECT_PROMPTS]
    return {"schemas": corpus, "json_object": objects}


def run_set(url, items, seeds, max_tokens, temperature):
    rows = []
    for prompt, fmt in items:
        for seed in range(1, seeds + 1):
            r = post(url + "/v1/chat/completions", {
                "messages": [{"role": "user", "content": prompt}], "response_format": fmt, "seed": seed,
                "temperature": temperature, "max_tokens": max_tokens})
            if "error" in r:
                rows.append({"error": r["error"]["message"]})
                continue
            ch = r["choices"][0]
            text = ch["message"]["content"] or ""
            runs = [len(m) for m in re.findall(r"[ \t\r\n]+", text)]
            rows.append({"finish": ch["finish_reason"], "tokens": r["usage"]["completion_tokens"], "bytes": len(text),
                         "ws": sum(runs), "max_ws": max(runs, default=0),
                         "repeated_key": repeated_key(text) if ch["finish_reason"] == "stop" else False})
    return rows


def summarize(name, set_name, rows):
    ok = [r for r in rows if "error" not in r]
    n = max(1, len(ok))
    return {"bin": name, "set": set_name, "n": len(rows), "errors": len(rows) - len(ok),
            "length_share": sum(r["finish"] == "length" for r in ok) / n,
            "mean_tokens": sum(r["tokens"] for r in ok) / n,
            "ws_share": sum(r["ws"] for r in ok) / max(1, sum(r["bytes"] for r in ok)),
            "max_ws_run": max((r["max_ws"] for r in ok), default=0),
            "repeated_key_answers": sum(r["repeated_key"] for r in ok)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", required=True, help="NAME=PATH[::SERVE ARGS]")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--model", default=os.environ.get("SPATE_MODEL", str(DEFAULT_MODEL)))
    ap.add_argument("--out")
    a = ap.parse_args()
    out = open(a.out, "a") if a.out else sys.stdout
    results = []
    for spec in a.bin:
        name, rest = spec.split("=", 1)
        path, _, args = rest.partition("::")
        argv = [path, "serve", "--model", a.model, "--host", "127.0.0.1", "--port", "{port}", "--threads", "2"]
        with Server(argv + shlex.split(args), env={"SPATE_SKIP_WARMUP": "1"}) as server:
            for set_name, items in cases().items():
                s = summarize(name, set_name, run_set(server.url, items, a.seeds, a.max_tokens, a.temperature))
                s.update(max_tokens=a.max_tokens, temperature=a.temperature, seeds=a.seeds)
                results.append(s)
                print(json.dumps(s), file=out, flush=True)
    print(f"{'bin':8} {'set':12} {'n':>4} {'err':>4} {'length':>7} {'tokens':>7} {'ws':>6} {'maxws':>6} {'dupkey':>6}", file=sys.stderr)
    for s in results:
        print(f"{s['bin']:8} {s['set']:12} {s['n']:4d} {s['errors']:4d} {s['length_share']:7.1%} {s['mean_tokens']:7.1f} "
              f"{s['ws_share']:6.1%} {s['max_ws_run']:6d} {s['repeated_key_answers']:6d}", file=sys.stderr)


if __name__ == "__main__":
    main()
