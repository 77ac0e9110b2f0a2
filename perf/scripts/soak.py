#!/usr/bin/env python3
"""Soak client (issue 13): many concurrent connections against one running
`spate serve` for a long time, a mix of normal and abusive traffic, with the
server's RSS and open file descriptors sampled from /proc.

Usage: perf/scripts/soak.py --url http://127.0.0.1:PORT --pid PID [--duration-s 1800]
                    [--connections 64] [--model-name NAME] [--api-key KEY]
                    [--sample-s 10] [--warmup-s 300] [--out FILE.jsonl]

Each of --connections workers loops until the duration is over, picking one
of (weights in MIX):
  chat_stream      POST /v1/chat/completions, stream, read to [DONE]
  chat             POST /v1/chat/completions, not streamed
  completion       POST /v1/completions, stream and not (alternating)
  ws_response      the Responses WebSocket mode: response.create, read to the end
  abort            a streamed completion closed after its first chunk
  malformed        bad JSON, wrong types, invalid UTF-8 (expects 400)
  oversized        a body over the server's --max-body-bytes (expects 413)
Generation is short (max_tokens 8-24), so many requests run.

Every RSS / fd sample is one JSON line in --out (default ~/.cache/spate/bench/soak-<date>.jsonl),
as is the summary, which is also printed:
  requests        served (answered with the status the kind expects)
  unexpected      answers with another status (listed by kind and status)
  status_5xx      answers with a 5xx status (must be 0)
  kv_usage_end    spate:kv_cache_usage_perc after the load stopped (must reach 0)
  running_end     spate:num_requests_running after the load stopped (must reach 0)
  rss_growth_pct  RSS growth from the first sample after --warmup-s to the end (must be <= 5);
                  not judged when the run is shorter than 2 x --warmup-s
  fds_start/end   open fds before the load and after it stopped
Exit status 1 when a criterion fails.
"""
import argparse
import asyncio
import json
import os
import random
import sys
import time
import urllib.parse
from pathlib import Path

import websockets

MIX = {"chat_stream": 5, "chat": 3, "completion": 4, "ws_response": 2, "abort": 2, "malformed": 2, "oversized": 1}
EXPECTED = {"chat_stream": 200, "chat": 200, "completion": 200, "ws_response": 200, "abort": 200, "malformed": 400,
            "oversized": 413}
PROMPTS = ["Tell me a short story.", "What is 2 + 2?", "Name three colors.", "Write a haiku about rain.",
           "Explain what a CPU does.", "Say hello in French."]
MALFORMED = [b'{"messages": [', b'{"messages": "hi"}', b'{"messages": [{"role": "user", "content": 5}]}',
             b'{"model": "x", "prompt": "\xff\xfe"}', b'[1, 2, 3]', b'{"prompt": "hi", "max_tokens": -1}']


class Http:
    """One request per connection (Connection: close), raw asyncio streams."""

    def __init__(self, url, api_key):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port or 80
        self.api_key = api_key

    async def request(self, path, body: bytes, read_limit=None, abort_after_first=False, timeout=120):
        reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), 30)
        try:
            head = (f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nConnection: close\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n")
            if self.api_key:
                head += f"Authorization: Bearer {self.api_key}\r\n"
            writer.write(head.encode() + b"\r\n")
            try:
                writer.write(body)
                await writer.drain()
            except (ConnectionResetError, BrokenPipeError):
                pass  # the server may answer (413) before reading everything; read that answer
            status_line = await asyncio.wait_for(reader.readline(), timeout)
            status = int(status_line.split()[1])
            if abort_after_first:
                await asyncio.wait_for(reader.readuntil(b"data:"), timeout)
                return status
            await asyncio.wait_for(reader.read(), timeout)  # Connection: close: read to EOF
            return status
        finally:
            writer.close()


def chat_body(model, stream):
    return json.dumps({"model": model, "messages": [{"role": "user", "content": random.choice(PROMPTS)}],
                       "max_tokens": random.randint(8, 24), "temperature": 0.7, "stream": stream}).encode()


async def ws_response(url, model, api_key):
    u = urllib.parse.urlsplit(url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    async with websockets.connect(f"ws://{u.hostname}:{u.port}/v1/responses", additional_headers=headers,
                                  open_timeout=30) as ws:
        await ws.send(json.dumps({"type": "response.create", "model": model, "input": random.choice(PROMPTS),
                                  "max_output_tokens": random.randint(8, 24)}))
        while True:
            ev = json.loads(await asyncio.wait_for(ws.recv(), 120))
            if ev["type"] in ("response.completed", "response.incomplete"):
                return 200
            if ev["type"] in ("error", "response.failed"):
                return 500


async def one(kind, http, args):
    m = args.model_name
    if kind == "chat_stream":
        return await http.request("/v1/chat/completions", chat_body(m, True))
    if kind == "chat":
        return await http.request("/v1/chat/completions", chat_body(m, False))
    if kind == "completion":
        body = json.dumps({"model": m, "prompt": random.choice(PROMPTS), "max_tokens": random.randint(8, 24),
                           "stream": random.random() < 0.5}).encode()
        return await http.request("/v1/completions", body)
    if kind == "ws_response":
        return await ws_response(args.url, m, args.api_key)
    if kind == "abort":
        body = json.dumps({"model": m, "prompt": random.choice(PROMPTS), "max_tokens": 200, "ignore_eos": True,
                           "stream": True}).encode()
        return await http.request("/v1/completions", body, abort_after_first=True)
    if kind == "malformed":
        return await http.request("/v1/chat/completions", random.choice(MALFORMED))
    if kind == "oversized":
        return await http.request("/v1/completions", b'{"prompt": "' + b"x" * args.oversized_bytes + b'"}')
    raise ValueError(kind)


def proc_sample(pid):
    rss_kb = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
    return {"t": time.time(), "rss_mb": rss_kb / 1024, "fds": len(os.listdir(f"/proc/{pid}/fd"))}


async def metrics(url):
    u = urllib.parse.urlsplit(url)
    reader, writer = await asyncio.open_connection(u.hostname, u.port)
    writer.write(f"GET /metrics HTTP/1.1\r\nHost: {u.hostname}\r\nConnection: close\r\n\r\n".encode())
    data = (await reader.read()).decode()
    writer.close()
    out = {}
    for line in data.split("\r\n\r\n", 1)[1].splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name.split("{", 1)[0]] = out.get(name.split("{", 1)[0], 0.0) + float(value)
    return out


async def amain(args):
    http = Http(args.url, args.api_key)
    kinds = [k for k, w in MIX.items() for _ in range(w)]
    counts, unexpected, n_5xx = {}, {}, 0
    samples = []
    out = open(args.out, "w")
    deadline = time.monotonic() + args.duration_s

    async def worker(i):
        nonlocal n_5xx
        rng = random.Random(i)
        while time.monotonic() < deadline:
            kind = rng.choice(kinds)
            try:
                status = await one(kind, http, args)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, websockets.WebSocketException) as e:
                status = f"exception {type(e).__name__}"
            if isinstance(status, int) and status >= 500:
                n_5xx += 1
            if status == EXPECTED[kind]:
                counts[kind] = counts.get(kind, 0) + 1
            else:
                key = f"{kind} {status}"
                unexpected[key] = unexpected.get(key, 0) + 1

    async def sampler():
        while time.monotonic() < deadline:
            s = proc_sample(args.pid)
            samples.append(s)
            out.write(json.dumps({"sample": s}) + "\n")
            out.flush()
            await asyncio.sleep(args.sample_s)

    fds_start = proc_sample(args.pid)["fds"]
    t0 = time.monotonic()
    await asyncio.gather(sampler(), *(worker(i) for i in range(args.connections)))
    elapsed = time.monotonic() - t0
    # Let the cancelled and finishing requests drain, then read the engine's state.
    m = {}
    for _ in range(60):
        m = await metrics(args.url)
        if m.get("spate:kv_cache_usage_perc", 1) == 0 and m.get("spate:num_requests_running", 1) == 0:
            break
        await asyncio.sleep(1)
    await asyncio.sleep(1)
    end = proc_sample(args.pid)
    samples.append(end)
    after_warmup = [s for s in samples if s["t"] >= samples[0]["t"] + args.warmup_s]
    judged = args.duration_s >= 2 * args.warmup_s and len(after_warmup) >= 2
    growth = (end["rss_mb"] / after_warmup[0]["rss_mb"] - 1) * 100 if judged else None
    summary = {"duration_s": round(elapsed, 1), "connections": args.connections, "requests": sum(counts.values()),
               "by_kind": counts, "unexpected": unexpected, "status_5xx": n_5xx,
               "kv_usage_end": m.get("spate:kv_cache_usage_perc"), "running_end": m.get("spate:num_requests_running"),
               "rss_mb_start": samples[0]["rss_mb"], "rss_mb_after_warmup": after_warmup[0]["rss_mb"] if judged else None,
               "rss_mb_end": end["rss_mb"], "rss_growth_pct": None if growth is None else round(growth, 2),
               "fds_start": fds_start, "fds_end": end["fds"]}
    failures = []
    if n_5xx:
        failures.append("5xx answers")
    if unexpected:
        failures.append("unexpected answers")
    if summary["kv_usage_end"] != 0 or summary["running_end"] != 0:
        failures.append("KV cache or running requests not back to 0")
    if growth is not None and growth > 5:
        failures.append(f"RSS grew {growth:.1f}% after warmup")
    if end["fds"] > fds_start + 4:
        failures.append("open fds did not return")
    summary["failures"] = failures
    out.write(json.dumps({"summary": summary}) + "\n")
    out.close()
    print(json.dumps(summary, indent=1))
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description="spate soak client")
    ap.add_argument("--url", required=True)
    ap.add_argument("--pid", type=int, required=True, help="the server process, for /proc sampling")
    ap.add_argument("--duration-s", type=float, default=1800)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--model-name", default="SmolLM2-135M-Instruct.Q4_1")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--sample-s", type=float, default=10)
    ap.add_argument("--warmup-s", type=float, default=300)
    ap.add_argument("--oversized-bytes", type=int, default=9 << 20, help="body size of 'oversized' (> --max-body-bytes)")
    ap.add_argument("--out", default=str(Path.home() / ".cache" / "spate" / "bench" /
                                         time.strftime("soak-%Y%m%d-%H%M%S.jsonl")))
    args = ap.parse_args()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    sys.exit(asyncio.run(amain(args)))


if __name__ == "__main__":
    main()
