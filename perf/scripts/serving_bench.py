#!/usr/bin/env python3
"""Serving benchmark client: runs one scenario against an OpenAI-compatible
server (spate serve or llama-server) and prints one JSON line of metrics.

Usage: perf/scripts/serving_bench.py --url http://127.0.0.1:PORT --scenario throughput|prefix|chunked
                             [--rep N] [--data perf/data] [--label NAME] [--model-name ID]

Every request is POST /v1/completions with a plain "prompt" string,
"stream": true, "stream_options": {"include_usage": true}, temperature 0 and
"ignore_eos": true. One short warm-up request precedes the measurement.

Definitions (all times from time.perf_counter() in this process):
  TTFT  from just before the connection is opened to the first SSE chunk whose
        choices[0].text is non-empty (or that carries token ids)
  ITL   gaps between consecutive such content chunks of one request (a chunk
        may carry several tokens; chunks arriving in one read get equal stamps)
  e2e   from the same start to the end of the stream ([DONE] or EOF)
  generated tokens  usage.completion_tokens of the final chunk when present,
        else the number of content chunks
  percentiles  linear interpolation between order statistics (numpy's default)

Scenarios (prompt files from perf/data/make_prompts.py):
  throughput  16 closed-loop clients x 2 requests = 32 distinct ~120-token
              prompts (throughput.jsonl), max_tokens 64. Reports aggregate
              generated tok/s (generated tokens / wall time from the first
              send to the last stream end), TTFT p50/p99, ITL p50/p99, e2e p50.
  prefix      conversation number (rep mod 16) of prefix.jsonl: turn 1 is the
              ~1000-token prompt, max_tokens 16; turn 2 is turn 1 + its reply +
              "\\nUser: <message>\\nAssistant:", max_tokens 16. Reports both
              TTFTs and turn1/turn2.
  chunked     phase A: 8 streams (max_tokens 256) alone; phase B: 8 other
              streams, and 1 s after they all started decoding one ~2000-token prompt
              (max_tokens 16). Reports the 8 streams' ITL p50/p99/max in each
              phase, the p99 and max ratios B/A, the long request's TTFT, and
              whether its prefill ended before any stream ended. "1 s after
              they start" is counted from the moment all 8 streams have their
              first token, so the long prefill always meets 8 decoding streams
              (on a slow prefill the streams' own prompts take longer than 1 s).

The client is asyncio with raw HTTP/1.1 over asyncio streams (one connection
per request, "Connection: close"), so it costs the servers little CPU.
Exit status 1 (message on stderr) when any request fails.
"""
import argparse
import asyncio
import json
import os
import time
import urllib.parse

from perflib import PERF, add_client_args, run_or_exit

STREAMS = 16            # throughput: concurrent clients
PER_CLIENT = 2          # throughput: requests per client
THR_MAX_TOKENS = 64
PREFIX_MAX_TOKENS = 16
CHUNKED_STREAMS = 8
CHUNKED_MAX_TOKENS = 256
LONG_DELAY_S = 1.0
LONG_MAX_TOKENS = 16
WARMUP_PROMPT = "Warm-up: say something short about the weather."


class RequestError(Exception):
    pass


class Result:
    """Timings and output of one streamed completion."""

    def __init__(self):
        self.t_start = 0.0
        self.t_first = None       # first content chunk
        self.t_end = 0.0
        self.chunk_times = []     # content chunks only
        self.text = []
        self.completion_tokens = None  # from usage
        self.prompt_tokens = None
        self.cached_tokens = None      # usage.prompt_tokens_details.cached_tokens, if sent
        self.prompt_processed = None   # llama-server: timings.prompt_n
        self.finish_reason = None

    @property
    def ttft(self):
        return self.t_first - self.t_start

    @property
    def e2e(self):
        return self.t_end - self.t_start

    @property
    def generated(self):
        return self.completion_tokens if self.completion_tokens is not None else len(self.chunk_times)

    def itls(self):
        c = self.chunk_times
        return [b - a for a, b in zip(c, c[1:])]


def percentile(values, q):
    """q in [0, 100]; linear interpolation between closest ranks."""
    if not values:
        return None
    v = sorted(values)
    pos = (len(v) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def ms(x):
    return None if x is None else round(x * 1000.0, 2)


async def read_body(reader, headers):
    """Yields the response body in pieces: chunked, Content-Length or until EOF."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            line = await reader.readline()
            if not line:
                raise RequestError("connection closed inside a chunked body")
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return
            yield await reader.readexactly(size)
            await reader.readexactly(2)  # CRLF after the chunk
    elif "content-length" in headers:
        n = int(headers["content-length"])
        while n > 0:
            piece = await reader.read(min(n, 65536))
            if not piece:
                raise RequestError("connection closed before Content-Length bytes")
            n -= len(piece)
            yield piece
    else:
        while True:
            piece = await reader.read(65536)
            if not piece:
                return
            yield piece


class Client:
    def __init__(self, url, model_name):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port or 80
        self.model_name = model_name

    async def _request(self, method, path, body=None):
        """Opens a connection, sends one request; returns (status, headers, reader, writer)."""
        reader, writer = await asyncio.open_connection(self.host, self.port)
        data = b"" if body is None else json.dumps(body).encode()
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                f"Accept: text/event-stream, application/json\r\nConnection: close\r\n")
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        writer.write(head.encode() + b"\r\n" + data)
        await writer.drain()
        status_line = await reader.readline()
        parts = status_line.split(None, 2)
        if len(parts) < 2:
            raise RequestError(f"bad status line {status_line!r}")
        headers = {}
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        return int(parts[1]), headers, reader, writer

    async def post_stream(self, path, body):
        """POSTs body; returns (headers, reader, writer) of a 200 answer, the caller closes writer.
        Raises RequestError (connection closed) on any other status."""
        status, headers, reader, writer = await self._request("POST", path, body)
        if status != 200:
            try:
                err = b"".join([p async for p in read_body(reader, headers)])
            finally:
                writer.close()
            raise RequestError(f"HTTP {status}: {err[:500].decode(errors='replace')}")
        return headers, reader, writer

    async def get_json(self, path):
        status, headers, reader, writer = await self._request("GET", path)
        body = b"".join([p async for p in read_body(reader, headers)])
        writer.close()
        return status, (json.loads(body) if body.strip() else None)

    async def complete(self, prompt, max_tokens, on_first=None):
        """One streamed completion; returns a Result. Raises RequestError.
        on_first(), if given, is called once when the first content chunk arrives."""
        body = {"model": self.model_name, "prompt": prompt, "max_tokens": max_tokens,
                "temperature": 0, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}}
        r = Result()
        r.t_start = time.perf_counter()
        headers, reader, writer = await self.post_stream("/v1/completions", body)
        try:
            buf = b""
            done = False
            body_iter = read_body(reader, headers)
            try:
                async for piece in body_iter:
                    now = time.perf_counter()
                    buf += piece.replace(b"\r\n", b"\n")
                    while b"\n\n" in buf and not done:
                        event, buf = buf.split(b"\n\n", 1)
                        data = b"\n".join(l[5:].lstrip() for l in event.split(b"\n") if l.startswith(b"data:"))
                        if not data:
                            continue
                        if data.strip() == b"[DONE]":
                            done = True
                            break
                        had_first = r.t_first is not None
                        self._on_chunk(r, json.loads(data), now)
                        if on_first and not had_first and r.t_first is not None:
                            on_first()
                    if done:
                        break
            finally:
                await body_iter.aclose()
            r.t_end = time.perf_counter()
        finally:
            writer.close()
        if r.t_first is None:
            raise RequestError(f"no content chunk in the stream (finish_reason {r.finish_reason})")
        return r

    @staticmethod
    def _on_chunk(r, o, now):
        if "error" in o:
            raise RequestError(f"error chunk: {json.dumps(o)[:500]}")
        for c in o.get("choices") or []:
            if c.get("text") or c.get("token_ids") or c.get("tokens"):
                if r.t_first is None:
                    r.t_first = now
                r.chunk_times.append(now)
                r.text.append(c.get("text") or "")
            if c.get("finish_reason"):
                r.finish_reason = c["finish_reason"]
        u = o.get("usage")
        if u:
            r.completion_tokens = u.get("completion_tokens", r.completion_tokens)
            r.prompt_tokens = u.get("prompt_tokens", r.prompt_tokens)
            d = u.get("prompt_tokens_details") or {}
            if d.get("cached_tokens") is not None:
                r.cached_tokens = d["cached_tokens"]
        t = o.get("timings")
        if t and "prompt_n" in t:
            r.prompt_processed = t["prompt_n"]


def load_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


def latency_summary(results):
    ttft = [r.ttft for r in results]
    itl = [g for r in results for g in r.itls()]
    e2e = [r.e2e for r in results]
    return {"ttft_p50_ms": ms(percentile(ttft, 50)), "ttft_p99_ms": ms(percentile(ttft, 99)),
            "itl_p50_ms": ms(percentile(itl, 50)), "itl_p99_ms": ms(percentile(itl, 99)),
            "e2e_p50_ms": ms(percentile(e2e, 50))}


async def scenario_throughput(cl, data_dir, rep):
    prompts = [p["prompt"] for p in load_jsonl(os.path.join(data_dir, "throughput.jsonl"))]
    need = STREAMS * PER_CLIENT
    if len(prompts) < need:
        raise RequestError(f"throughput.jsonl has {len(prompts)} prompts, need {need}")
    results = []

    async def client(c):
        for k in range(PER_CLIENT):  # closed loop: next request when the previous ended
            results.append(await cl.complete(prompts[c + STREAMS * k], THR_MAX_TOKENS))

    t0 = time.perf_counter()
    await asyncio.gather(*(client(c) for c in range(STREAMS)))
    wall = max(r.t_end for r in results) - t0
    gen = sum(r.generated for r in results)
    out = {"gen_tok_s": round(gen / wall, 2), **latency_summary(results), "wall_s": round(wall, 3),
           "requests": len(results), "generated_tokens": gen,
           "prompt_tokens": sum(r.prompt_tokens or 0 for r in results),
           "content_chunks": sum(len(r.chunk_times) for r in results)}
    return out


async def scenario_prefix(cl, data_dir, rep):
    convs = load_jsonl(os.path.join(data_dir, "prefix.jsonl"))
    conv = convs[rep % len(convs)]
    r1 = await cl.complete(conv["turn1"], PREFIX_MAX_TOKENS)
    turn2 = conv["turn1"] + "".join(r1.text) + "\nUser: " + conv["turn2_user"] + "\nAssistant:"
    r2 = await cl.complete(turn2, PREFIX_MAX_TOKENS)
    return {"ttft_turn1_ms": ms(r1.ttft), "ttft_turn2_ms": ms(r2.ttft),
            "ttft_ratio": round(r1.ttft / r2.ttft, 2), "conversation": conv["id"],
            "prompt_tokens_turn1": r1.prompt_tokens, "prompt_tokens_turn2": r2.prompt_tokens,
            "cached_tokens_turn2": r2.cached_tokens, "prompt_processed_turn2": r2.prompt_processed}


async def scenario_chunked(cl, data_dir, rep):
    rows = load_jsonl(os.path.join(data_dir, "chunked.jsonl"))
    streams = [r["prompt"] for r in rows if r["kind"] == "stream"]
    longs = [r["prompt"] for r in rows if r["kind"] == "long"]
    if len(streams) < 2 * CHUNKED_STREAMS or not longs:
        raise RequestError("chunked.jsonl needs 16 stream prompts and a long prompt")

    async def phase(prompts, with_long):
        started = {"n": 0}
        all_decoding = asyncio.Event()

        def on_first():
            started["n"] += 1
            if started["n"] == len(prompts):
                all_decoding.set()

        tasks = [asyncio.create_task(cl.complete(p, CHUNKED_MAX_TOKENS, on_first)) for p in prompts]
        long_r = None
        if with_long:
            await all_decoding.wait()
            await asyncio.sleep(LONG_DELAY_S)
            long_r = await cl.complete(longs[rep % len(longs)], LONG_MAX_TOKENS)
        return await asyncio.gather(*tasks), long_r

    a, _ = await phase(streams[:CHUNKED_STREAMS], False)
    b, lr = await phase(streams[CHUNKED_STREAMS:2 * CHUNKED_STREAMS], True)
    ia = [g for r in a for g in r.itls()]
    ib = [g for r in b for g in r.itls()]
    p99a, p99b = percentile(ia, 99), percentile(ib, 99)
    # The long prompt must have been prefilled while all streams were decoding.
    overlapped = lr.t_first < min(r.t_end for r in b)
    return {"itl_p50_alone_ms": ms(percentile(ia, 50)), "itl_p99_alone_ms": ms(p99a), "itl_max_alone_ms": ms(max(ia)),
            "itl_p50_mixed_ms": ms(percentile(ib, 50)), "itl_p99_mixed_ms": ms(p99b), "itl_max_mixed_ms": ms(max(ib)),
            "itl_p99_ratio": round(p99b / p99a, 2), "itl_max_ratio": round(max(ib) / max(ia), 2),
            "long_ttft_ms": ms(lr.ttft), "long_prompt_tokens": lr.prompt_tokens, "long_overlapped": overlapped,
            "gaps_alone": len(ia), "gaps_mixed": len(ib),
            "stream_tok_s_alone": round(sum(r.generated for r in a) / (max(r.t_end for r in a) - min(r.t_start for r in a)), 2)}


SCENARIOS = {"throughput": scenario_throughput, "prefix": scenario_prefix, "chunked": scenario_chunked}


async def amain(args):
    model_name = args.model_name
    if not model_name:
        try:
            status, models = await Client(args.url, "").get_json("/v1/models")
            model_name = models["data"][0]["id"] if status == 200 else "default"
        except (OSError, RequestError, ValueError, KeyError, IndexError, TypeError):
            model_name = "default"
    cl = Client(args.url, model_name)
    await cl.complete(WARMUP_PROMPT, 4)
    t0 = time.time()
    out = await SCENARIOS[args.scenario](cl, args.data, args.rep)
    return {"scenario": args.scenario, "label": args.label, "rep": args.rep, **out,
            "seconds": round(time.time() - t0, 2)}


def main():
    ap = argparse.ArgumentParser(description="serving benchmark client (see the module docstring)")
    add_client_args(ap)
    ap.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    ap.add_argument("--rep", type=int, default=0, help="repetition number (picks distinct prompts)")
    ap.add_argument("--data", default=str(PERF / "data"), help="prompt files dir (default perf/data)")
    args = ap.parse_args()
    out = run_or_exit(f"serving_bench: {args.scenario} against {args.url}", lambda: asyncio.run(amain(args)),
                      (RequestError, OSError, asyncio.IncompleteReadError, ValueError))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
