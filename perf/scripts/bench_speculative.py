#!/usr/bin/env python3
"""Speculative-decoding benchmark client: decode speed of streams with
speculation on and off against ONE spate server started with
--speculative-config (each request toggles it with "speculative_decoding"), or
plain decode speed against any OpenAI-compatible server (--plain-only, e.g.
llama-server). Prints one JSON line per (workload, streams).

Usage: perf/scripts/bench_speculative.py --url URL [--streams 1,4,16] [--reps 3]
                                 [--workload grounded,chat] [--max-tokens 128]
       perf/scripts/bench_speculative.py --llama-lookup BIN --model GGUF [--draft 4]
         (llama.cpp's counterpart on the grounded prompts: llama-lookup with
          --draft N and with --draft 0, single stream; decode tok/s as it
          reports it, the median over prompts and reps)

Workloads (chat completions, temperature 0, the server's chat template):
  grounded  input-grounded: repeat, lightly rewrite or edit a passage or a
            code snippet given in the prompt (prompt lookup finds the output
            in the input);
  chat      open-ended questions (little to look up).
acceptance: accepted / proposed draft tokens over the "on" runs (spate's
spec_decode counters).
Per request: decode tok/s = (completion tokens - 1) / (last content chunk -
first content chunk), from the SSE stream. Per rep and mode: the mean over the
concurrent streams. Reported: the median over reps of that, for "on" and
"off", and their ratio. On and off alternate within each rep (off first on
even reps) so drift hits both.
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

from perflib import median

PASSAGES = [
    "The old lighthouse stood at the edge of the cliff for two hundred years. Every night its keeper climbed the "
    "spiral stairs, trimmed the wick and watched the beam sweep across the dark water, warning ships away from the rocks.",
    "Photosynthesis converts light energy into chemical energy. Plants absorb sunlight with chlorophyll, take in "
    "carbon dioxide through their leaves and water through their roots, and release oxygen as a by-product.",
    "def total_price(items, tax_rate):\n    subtotal = 0\n    for item in items:\n        subtotal += item.price * "
    "item.quantity\n    tax = subtotal * tax_rate\n    return subtotal + tax\n",
    "The committee met on Tuesday to review the budget. After a long discussion, members agreed to reduce travel "
    "spending by ten percent and to move the savings into the training program for new staff.",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n        self.items.append(x)"
    "\n\n    def pop(self):\n        return self.items.pop()\n",
    "Mount Everest is the highest mountain above sea level. It lies in the Himalayas on the border between Nepal and "
    "China, and climbers usually attempt the summit in May, when the winds are calmer.",
]
TASKS = [
    "Repeat the following text exactly, word for word:\n\n{p}",
    "Rewrite the following text, changing only the first sentence:\n\n{p}",
    "Copy the following, fixing any spelling mistakes:\n\n{p}",
]
CODE_TASKS = ["Rename the variable 'subtotal' to 'amount' in this code and show the whole code:\n\n{p}",
              "Add a docstring to this code and show the whole code:\n\n{p}"]
CHAT = [
    "Why is the sky blue?", "Give me three ideas for a birthday party.", "What makes a good teacher?",
    "Explain how a bicycle stays upright.", "Write a short story about a robot who learns to paint.",
    "What are the pros and cons of working from home?", "How do vaccines work?", "Describe your ideal weekend.",
    "What is the difference between weather and climate?", "Suggest a name for a coffee shop and explain it.",
    "How should I prepare for a job interview?", "What is recursion? Explain simply.",
    "Write a haiku about autumn.", "Why do cats purr?", "Plan a one-day trip to a city you like.",
    "What are black holes?", "How can I sleep better?",
]


def grounded_prompts():
    out = []
    for i, p in enumerate(PASSAGES):
        tasks = CODE_TASKS + TASKS[:1] if p.startswith(("def ", "class ")) else TASKS
        for t in tasks:
            out.append(t.format(p=p))
    return out


def stream_one(url, model, prompt, max_tokens, speculative, result):
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    if speculative is not None:
        body["speculative_decoding"] = speculative
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    stamps, n_tokens, text = [], None, ""
    with urllib.request.urlopen(req, timeout=600) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            d = json.loads(line[6:])
            if d.get("usage"):
                n_tokens = d["usage"]["completion_tokens"]
            if d.get("choices") and d["choices"][0]["delta"].get("content"):
                stamps.append(time.perf_counter())
                text += d["choices"][0]["delta"]["content"]
    result["text"] = text
    result["tokens"] = n_tokens or len(stamps)
    span = stamps[-1] - stamps[0] if len(stamps) > 1 else 0.0
    result["decode_tps"] = (result["tokens"] - 1) / span if span > 0 else 0.0


def spec_counters(url):
    """(draft tokens, accepted tokens) from spate's /metrics."""
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    got = {}
    for line in text.splitlines():
        for name in ("spate:spec_decode_num_draft_tokens_total", "spate:spec_decode_num_accepted_tokens_total"):
            if line.startswith(name + "{") or line.startswith(name + " "):
                got[name] = float(line.rsplit(" ", 1)[1])
    return (got.get("spate:spec_decode_num_draft_tokens_total", 0.0),
            got.get("spate:spec_decode_num_accepted_tokens_total", 0.0))


def run_batch(url, model, prompts, max_tokens, speculative):
    results = [dict() for _ in prompts]
    threads = [threading.Thread(target=stream_one, args=(url, model, p, max_tokens, speculative, r))
               for p, r in zip(prompts, results)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if any("decode_tps" not in r for r in results):
        sys.exit("a request failed")
    return results


def llama_lookup(binary, model, threads, max_tokens, draft, reps):
    """llama.cpp's prompt-lookup decoding (llama-lookup) on the grounded
    prompts, single stream, in SmolLM2's ChatML template (llama-lookup applies
    no chat template): the median over prompts x reps of its reported decode
    speed, and the acceptance."""
    speeds, drafted, accepted = [], 0, 0
    for rep in range(reps):
        for p in grounded_prompts():
            text = f"<|im_start|>user\n{p}<|im_end|>\n<|im_start|>assistant\n"
            out = subprocess.run([binary, "-m", model, "-p", text, "-n", str(max_tokens), "-t", str(threads),
                                  "--draft", str(draft), "--temp", "0", "-c", "2048"],
                                 capture_output=True, text=True, timeout=300).stderr
            m = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds", out)
            if not m:
                sys.exit("llama-lookup printed no decode speed:\n" + out[-2000:])
            speeds.append((int(m.group(1)) - 1) / float(m.group(2)))
            drafted += int(re.search(r"n_drafted\s+=\s+(\d+)", out).group(1))
            accepted += int(re.search(r"n_accept\s+=\s+(\d+)", out).group(1))
    return median(speeds), drafted, accepted


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="")
    ap.add_argument("--model-name", default="")
    ap.add_argument("--streams", default="1,4,16")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workload", default="grounded,chat")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--plain-only", action="store_true", help="no speculative_decoding field, one mode (any server)")
    ap.add_argument("--label", default="spate")
    ap.add_argument("--llama-lookup", default="", help="llama-lookup binary: run it instead of a server client")
    ap.add_argument("--model", default="", help="GGUF for --llama-lookup")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--draft", type=int, default=4)
    a = ap.parse_args()
    if a.llama_lookup:
        on, drafted, accepted = llama_lookup(a.llama_lookup, a.model, a.threads, a.max_tokens, a.draft, a.reps)
        off, _, _ = llama_lookup(a.llama_lookup, a.model, a.threads, a.max_tokens, 0, a.reps)
        print(json.dumps({"label": "llama.cpp llama-lookup", "workload": "grounded", "streams": 1, "reps": a.reps,
                          "max_tokens": a.max_tokens, "off_decode_tps": round(off, 2), "on_decode_tps": round(on, 2),
                          "speedup": round(on / off, 3), "n_drafted": drafted, "n_accepted": accepted}), flush=True)
        return
    model = a.model_name or json.load(urllib.request.urlopen(a.url + "/v1/models"))["data"][0]["id"]
    run_batch(a.url, model, ["Hello"], 8, None)  # warm-up
    for workload in a.workload.split(","):
        pool = grounded_prompts() if workload == "grounded" else CHAT
        for n in map(int, a.streams.split(",")):
            per_mode = {"on": [], "off": []}
            same = True
            before = None if a.plain_only else spec_counters(a.url)
            for rep in range(a.reps):
                prompts = [pool[(rep * n + i) % len(pool)] for i in range(n)]
                modes = [None] if a.plain_only else (["off", "on"] if rep % 2 == 0 else ["on", "off"])
                texts = {}
                for m in modes:
                    res = run_batch(a.url, model, prompts, a.max_tokens, None if m is None else m == "on")
                    per_mode[m or "off"].append(statistics.mean(r["decode_tps"] for r in res))
                    texts[m] = [r["text"] for r in res]
                if not a.plain_only:
                    same = same and texts["on"] == texts["off"]
            out = {"label": a.label, "workload": workload, "streams": n, "reps": a.reps, "max_tokens": a.max_tokens,
                   "off_decode_tps": round(median(per_mode["off"]), 2)}
            if not a.plain_only:
                out["on_decode_tps"] = round(median(per_mode["on"]), 2)
                out["speedup"] = round(out["on_decode_tps"] / out["off_decode_tps"], 3)
                out["identical_text"] = same
                after = spec_counters(a.url)
                drafted = after[0] - before[0]
                out["acceptance"] = round((after[1] - before[1]) / drafted, 3) if drafted else None
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
