#!/usr/bin/env python3
"""Many models in one server (issue 38): two measurements on the real server.

  lora  16 concurrent greedy completions (max_tokens 128, ignore_eos, ~100-token
        prompts), either all on the base model or spread round-robin over the
        base and 4 LoRA adapters (rank 16 on every attention and FFN matrix,
        tests/reference/make_lora_adapters.py). Rounds alternate base / mixed;
        reports generated tok/s per round, the medians and mixed/base.
  cold  time from a request for a model that is not loaded (its file in the
        page cache) to its first streamed token, with the model's warmup and
        with SPATE_SKIP_WARMUP=1; the model is unloaded (POST /models/unload)
        before each repetition. Reports each repetition and the medians.

Usage: perf/scripts/bench_models.py [--model GGUF] [--spate build/spate] [--threads 2]
         [--rounds 3] [--reps 3] [--only lora|cold] [--out FILE.jsonl]
"""
import argparse
import concurrent.futures
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from perflib import Server, median  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PROMPT = ("Write a long and detailed story about a lighthouse keeper who finds a message in a bottle, describing the sea, "
          "the weather, the keeper's daily routine, the letters he writes back, and the ships that pass by at night. ") * 2


def post(url, body, timeout=600):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def start(spate, args, env=None):
    """spate serve on a free loopback port, ready; returns (server, its URL)."""
    s = Server([spate, "serve", "--host", "127.0.0.1", "--port", "{port}", *args], env=env).start()
    return s, s.url


def stop(s):
    s.stop(grace_s=60.0)


def throughput(base, models, n_streams=16, max_tokens=128):
    def one(i):
        r = post(base + "/v1/completions", {"model": models[i % len(models)], "prompt": PROMPT, "max_tokens": max_tokens,
                                            "temperature": 0, "ignore_eos": True})
        return r["usage"]["completion_tokens"]
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(n_streams) as pool:
        n = sum(pool.map(one, range(n_streams)))
    return n / (time.perf_counter() - t0)


def bench_lora(a, out):
    d = Path(tempfile.mkdtemp(prefix="spate-lora-"))
    names = [f"r16-{i}" for i in range(1, 5)]
    for i, n in enumerate(names, 1):
        subprocess.run([sys.executable, REPO / "tests" / "reference" / "make_lora_adapters.py", "--base", a.model, "--out", d / f"{n}.gguf",
                        "--seed", str(i)], check=True)
    args = ["--model", a.model, "--served-model-name", "base", "--threads", str(a.threads), "--kv-cache-memory", "1GiB"]
    for n in names:
        args += ["--lora-modules", f"{n}={d / (n + '.gguf')}"]
    p, base = start(a.spate, args)
    try:
        throughput(base, ["base"] + names, max_tokens=8)  # installs the adapters, warms the caches
        rows = {"base": [], "mixed": []}
        for r in range(a.rounds):
            for mode in ("base", "mixed") if r % 2 == 0 else ("mixed", "base"):
                tok_s = throughput(base, ["base"] if mode == "base" else ["base"] + names)
                rows[mode].append(tok_s)
                print(f"round {r} {mode}: {tok_s:.1f} tok/s", flush=True)
        res = {"bench": "lora", "model": Path(a.model).name, "threads": a.threads, "streams": 16, "adapters": 4, "rank": 16,
               "base_tok_s": rows["base"], "mixed_tok_s": rows["mixed"], "base_median": median(rows["base"]),
               "mixed_median": median(rows["mixed"]), "ratio": median(rows["mixed"]) / median(rows["base"])}
        print(json.dumps(res))
        out.append(res)
    finally:
        stop(p)


def first_token_s(base, model):
    req = urllib.request.Request(base + "/v1/completions", method="POST", headers={"Content-Type": "application/json"},
                                 data=json.dumps({"model": model, "prompt": "Hello", "max_tokens": 4, "stream": True}).encode())
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            if line.startswith(b"data: {") and b'"text":"' in line and b'"text":""' not in line:
                return time.perf_counter() - t0
    raise RuntimeError("no token")


def bench_cold(a, out):
    d = Path(tempfile.mkdtemp(prefix="spate-models-"))
    (d / "m.gguf").symlink_to(Path(a.model).resolve())
    Path(a.model).read_bytes()  # into the page cache
    for warm in (True, False):
        p, base = start(a.spate, ["--models-dir", str(d), "--threads", str(a.threads), "--kv-cache-memory", "1GiB"],
                        env=None if warm else {"SPATE_SKIP_WARMUP": "1"})
        try:
            times = []
            for _ in range(a.reps):
                times.append(first_token_s(base, "m"))
                post(base + "/models/unload", {"model": "m"})
                deadline = time.time() + 60
                while json.loads(urllib.request.urlopen(base + "/v1/models/m").read())["status"]["value"] != "unloaded":
                    if time.time() > deadline:
                        sys.exit("the model did not unload")
                    time.sleep(0.05)
            res = {"bench": "cold", "model": Path(a.model).name, "warmup": warm, "threads": a.threads, "first_token_s": times,
                   "median_s": median(times)}
            print(json.dumps(res), flush=True)
            out.append(res)
        finally:
            stop(p)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=str(Path.home() / ".cache/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--spate", default=str(REPO / "build" / "spate"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", choices=["lora", "cold"])
    ap.add_argument("--out")
    a = ap.parse_args()
    out = []
    if a.only in (None, "lora"):
        bench_lora(a, out)
    if a.only in (None, "cold"):
        bench_cold(a, out)
    if a.out:
        with open(a.out, "a") as f:
            for r in out:
                f.write(json.dumps({**r, "date": time.strftime("%Y-%m-%d")}) + "\n")


if __name__ == "__main__":
    main()
