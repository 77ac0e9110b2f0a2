#!/usr/bin/env python3
"""The long-context sweep of the vLLM-vs-TGI comparison: spate and llama.cpp's
llama-server, in the same run, on the same GGUF and threads.

The prompt is "Once upon a time, there was a " + "very " * k, with k growing
by --step until the server answers 400 (spate: context_length_exceeded).
llama-server (0.3.16's llama.cpp) never refuses: it truncates a prompt longer
than its context, so its sweep stops one step past spate's limit (the record
says so). For each k and server: TTFT and decode
tok/s of a streamed /v1/completions request (temperature 0, --max-tokens
tokens, ignore_eos), the median of --reps runs. Prefix caching is off on both
(spate --no-enable-prefix-caching; llama-server "cache_prompt": false), so
every run prefills its whole prompt.

Servers run one at a time with the same context (--ctx, default the model's
8192 for SmolLM2): spate serve --max-model-len CTX, and llama-server -c CTX
--parallel 1. Output: JSON lines (--out), a PNG plot of TTFT and decode tok/s
against prompt length (--png; needs matplotlib, perf/requirements.txt), and a
summary line with the spate/llama-server ratios at the longest prompt both
servers took.

Usage: perf/scripts/long_context.py [--model GGUF] [--threads 2] [--step 512] [--reps 3]
                            [--max-tokens 32] [--ctx 8192] [--out FILE.jsonl] [--png FILE.png]
                            [--spate-bin PATH] [--peer-bin DIR] [--skip-peer]
"""
import argparse
import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from perflib import DEFAULT_MODEL, REPO, Server, find_peer_bin, median, sse_objects

PREFIX = "Once upon a time, there was a "


def stream_completion(port, body, timeout=900):
    """POSTs a streamed completion. Returns (status, error JSON or None, ttft_s, decode tok/s, n_tokens)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    res = conn.getresponse()
    if res.status != 200:
        raw = res.read()
        conn.close()
        try:
            return res.status, json.loads(raw), None, None, 0
        except ValueError:
            return res.status, {"error": {"message": raw.decode(errors="replace")}}, None, None, 0
    times = []
    for obj in sse_objects(res):
        choices = obj.get("choices") or []
        if choices and choices[0].get("text"):
            times.append(time.perf_counter())
    conn.close()
    if not times:
        return 200, None, None, None, 0
    ttft = times[0] - t0
    tps = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else None
    return 200, None, ttft, tps, len(times)


def n_prompt_tokens(spate_port, model, prompt):
    req = urllib.request.Request(f"http://127.0.0.1:{spate_port}/tokenize", json.dumps({"model": model, "prompt": prompt}).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)["count"]


def measure(name, port, model, args, k, prompt_tokens):
    """One k on one server: a "sample" record, or a "limit" record on a refusal."""
    prompt = PREFIX + "very " * k
    body = {"model": model, "prompt": prompt, "max_tokens": args.max_tokens, "temperature": 0, "stream": True,
            "ignore_eos": True, "cache_prompt": False}
    ttfts, tpss = [], []
    for _ in range(args.reps):
        status, err, ttft, tps, n = stream_completion(port, body)
        if status != 200:
            print(f"# {name}: k={k} answered {status}: {json.dumps(err)[:200]}", file=sys.stderr)
            return {"kind": "limit", "server": name, "k": k, "prompt_tokens": prompt_tokens, "status": status, "error": err}
        ttfts.append(ttft)
        if tps:
            tpss.append(tps)
    rec = {"kind": "sample", "server": name, "k": k, "prompt_tokens": prompt_tokens, "reps": args.reps,
           "ttft_s": median(ttfts), "decode_tok_s": median(tpss) if tpss else None, "ttft_all_s": ttfts}
    print(f"# {name}: k={k} prompt_tokens={prompt_tokens} ttft={rec['ttft_s']:.3f}s decode={rec['decode_tok_s'] or 0:.1f} tok/s",
          file=sys.stderr)
    return rec


def spate_server(args):
    cmd = [args.spate_bin, "serve", "--model", args.model, "--host", "127.0.0.1", "--port", "{port}", "--threads",
           str(args.threads), "--max-model-len", str(args.ctx), "--no-enable-prefix-caching", "--served-model-name", "m"]
    return Server(cmd, "/ready", args.log_dir / "spate.log")


def peer_server(args):
    cmd = [str(Path(args.peer_bin) / "llama-server"), "-m", args.model, "--host", "127.0.0.1", "--port", "{port}", "-t",
           str(args.threads), "-tb", str(args.threads), "-c", str(args.ctx), "--parallel", "1", "--alias", "m"]
    return Server(cmd, "/health", args.log_dir / "llama-server.log")


def plot(path, spate, peer):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, res, style in (("spate", spate, "o-"), ("llama-server", peer, "s--")):
        if not res:
            continue
        xs = [r["prompt_tokens"] for r in res.values()]
        a.plot(xs, [r["ttft_s"] for r in res.values()], style, label=name)
        b.plot(xs, [r["decode_tok_s"] or 0 for r in res.values()], style, label=name)
    a.set_xlabel("prompt tokens")
    a.set_ylabel("TTFT (s)")
    a.set_title("Time to first token")
    b.set_xlabel("prompt tokens")
    b.set_ylabel("decode tok/s")
    b.set_title("Decode speed after the prompt")
    for ax in (a, b):
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle('"Once upon a time, there was a " + "very " * k')
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=str(DEFAULT_MODEL))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--step", type=int, default=512)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--ctx", type=int, default=8192)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    ap.add_argument("--out", default=str(Path.home() / f".cache/spate/bench/long-context-{stamp}.jsonl"))
    ap.add_argument("--png", default=None, help="default: --out with .png")
    ap.add_argument("--spate-bin", default=os.environ.get("SPATE_BIN") or str(REPO / "build" / "spate"))
    ap.add_argument("--peer-bin", default=os.environ.get("PEER_BIN"))
    ap.add_argument("--skip-peer", action="store_true")
    args = ap.parse_args()
    if args.step < 1 or args.reps < 1:
        ap.error("--step and --reps must be >= 1")
    if not args.skip_peer and not args.peer_bin:
        args.peer_bin = find_peer_bin()
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    args.log_dir = out_path.with_suffix(".logs")
    args.log_dir.mkdir(parents=True, exist_ok=True)
    png = args.png or str(out_path.with_suffix(".png"))

    results = {"spate": {}, "llama-server": {}}
    servers = []
    with open(out_path, "w") as out:
        print(json.dumps({"kind": "config", "model": args.model, "threads": args.threads, "step": args.step, "reps": args.reps,
                          "max_tokens": args.max_tokens, "ctx": args.ctx}), file=out, flush=True)
        try:
            # Both servers up at once (idle, neither burns CPU); each k runs on
            # one then the other, the order alternating, so drift hits both.
            ports = {}
            for name, make in (("spate", spate_server), ("llama-server", peer_server)):
                if name == "llama-server" and args.skip_peer:
                    continue
                servers.append(make(args).start())
                ports[name] = servers[-1].port
            active = list(ports)
            k, step_i, spate_limit = 0, 0, None
            while active:
                # The prompt's length by spate's tokenizer (the same GGUF as the peer's).
                n_tok = n_prompt_tokens(ports["spate"], "m", PREFIX + "very " * k) if "spate" in ports else None
                order = active if step_i % 2 == 0 else list(reversed(active))
                for name in order:
                    if name == "llama-server" and spate_limit is not None and k > spate_limit:
                        # llama-server does not refuse an over-long prompt: it truncates
                        # it to its context. Past spate's limit there is nothing to compare.
                        rec = {"kind": "limit", "server": name, "k": k, "prompt_tokens": n_tok, "status": None,
                               "error": f"not refused up to k={k - args.step}; stopped one step past spate's limit"}
                    else:
                        rec = measure(name, ports[name], "m", args, k, n_tok)
                    print(json.dumps(rec), file=out, flush=True)
                    if rec["kind"] == "limit":
                        active.remove(name)
                        if name == "spate":
                            spate_limit = k
                    else:
                        results[name][k] = rec
                k += args.step
                step_i += 1
                if k > 10 * args.ctx:
                    raise RuntimeError("a server never refused a prompt; is --ctx right?")
        finally:
            for server in servers:
                server.stop()
        spate, peer = results.get("spate", {}), results.get("llama-server", {})
        both = sorted(set(spate) & set(peer))
        summary = {"kind": "summary", "longest_k_spate": max(spate) if spate else None,
                   "longest_k_peer": max(peer) if peer else None}
        if both:
            k = both[-1]
            summary.update({"longest_common_k": k, "prompt_tokens": spate[k]["prompt_tokens"],
                            "ttft_ratio_peer_over_spate": peer[k]["ttft_s"] / spate[k]["ttft_s"],
                            "decode_ratio_spate_over_peer": (spate[k]["decode_tok_s"] or 0) / (peer[k]["decode_tok_s"] or 1),
                            "spate_ttft_s": spate[k]["ttft_s"], "peer_ttft_s": peer[k]["ttft_s"],
                            "spate_decode_tok_s": spate[k]["decode_tok_s"], "peer_decode_tok_s": peer[k]["decode_tok_s"]})
        print(json.dumps(summary), file=out, flush=True)
        print(json.dumps(summary))
    try:
        plot(png, spate, peer)
        print(f"# plot: {png}", file=sys.stderr)
    except ImportError:
        print("# no plot: matplotlib is missing (pip install -r perf/requirements.txt)", file=sys.stderr)
    print(f"# results: {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
