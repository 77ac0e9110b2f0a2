#!/usr/bin/env python3
"""What the API formatters cost (issue 39): 16 concurrent greedy requests of 128
tokens, the same prompt and model, through OpenAI's /v1/chat/completions,
Anthropic's /v1/messages and Ollama's /api/chat, all streamed; rounds rotate the
order of the three. Reports generated tok/s per round, the medians and each
API's median over the chat endpoint's. The three give the same greedy tokens
(the same chat template and sampling), so they do the same engine work.

Usage: perf/scripts/bench_apis.py [--model GGUF] [--spate build/spate] [--threads 2] [--rounds 3] [--out FILE.jsonl]
"""
import argparse
import concurrent.futures
import json
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from perflib import Server, median  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PROMPT = "Write a long and detailed story about a lighthouse keeper and the ships that pass by at night."
N_STREAMS, MAX_TOKENS = 16, 128


def body_of(api):
    msgs = [{"role": "user", "content": PROMPT}]
    if api == "openai":
        return "/v1/chat/completions", {"model": "m", "messages": msgs, "max_tokens": MAX_TOKENS, "temperature": 0, "stream": True,
                                        "stream_options": {"include_usage": True}}
    if api == "anthropic":
        return "/v1/messages", {"model": "m", "messages": msgs, "max_tokens": MAX_TOKENS, "temperature": 0, "stream": True}
    return "/api/chat", {"model": "m", "messages": msgs, "stream": True, "options": {"temperature": 0, "num_predict": MAX_TOKENS}}


def tokens_of(api, lines):
    """Generated tokens, from each API's own usage report."""
    n = 0
    for line in lines:
        line = line.strip()
        if line.startswith(b"data: "):
            line = line[6:]
        if not line.startswith(b"{"):
            continue
        o = json.loads(line)
        if api == "openai" and o.get("usage"):
            n = o["usage"]["completion_tokens"]
        elif api == "anthropic" and o.get("type") == "message_delta":
            n = o["usage"]["output_tokens"]
        elif api == "ollama" and o.get("done"):
            n = o["eval_count"]
    return n


def one(url, api):
    path, body = body_of(api)
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=600) as r:
        return tokens_of(api, r.readlines())


def round_tok_s(url, api):
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(N_STREAMS) as pool:
        n = sum(pool.map(lambda _: one(url, api), range(N_STREAMS)))
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=str(Path.home() / ".cache/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--spate", default=str(REPO / "build" / "spate"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()
    apis = ["openai", "anthropic", "ollama"]
    rows = {api: [] for api in apis}
    argv = [a.spate, "serve", "--model", a.model, "--served-model-name", "m", "--port", "{port}", "--threads", str(a.threads),
            "--kv-cache-memory", "1GiB"]
    with Server(argv) as s:
        for api in apis:
            one(s.url, api)  # warm
        for r in range(a.rounds):
            for api in apis[r % 3:] + apis[:r % 3]:
                rows[api].append(round_tok_s(s.url, api))
                print(f"round {r} {api}: {rows[api][-1]:.1f} tok/s", flush=True)
    res = {"bench": "apis", "model": Path(a.model).name, "threads": a.threads, "streams": N_STREAMS, "max_tokens": MAX_TOKENS,
           **{f"{api}_tok_s": rows[api] for api in apis}, **{f"{api}_median": median(rows[api]) for api in apis},
           "anthropic_ratio": median(rows["anthropic"]) / median(rows["openai"]),
           "ollama_ratio": median(rows["ollama"]) / median(rows["openai"]), "date": time.strftime("%Y-%m-%d")}
    print(json.dumps(res))
    if a.out:
        with open(a.out, "a") as f:
            f.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
