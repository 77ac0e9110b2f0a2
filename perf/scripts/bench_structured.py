#!/usr/bin/env python3
"""Constrained-decoding benchmark client: runs schema sets from the
structured-outputs test corpus (tests/integration/schemas/) against one
OpenAI-compatible server (spate serve or llama-server), constrained and
unconstrained, and prints one JSON line per (set, mode).

Usage: perf/scripts/bench_structured.py --url http://127.0.0.1:PORT [--sets flat,nested] [--rounds 2]
                                [--label NAME] [--model-name ID] [--modes constrained,unconstrained]

Workload per set: STREAMS (16) closed-loop clients; client c sends the
prompt of the set's schema c, `--rounds` times in a row (round r: seed r+1),
so 16 streams decode together. Every request is POST /v1/chat/completions
with "stream": true, "stream_options": {"include_usage": true},
temperature 0.7, max_tokens MAX_TOKENS (400).

  constrained    + "response_format": {"type": "json_schema", "json_schema":
                 {"name", "schema", "strict": true}} (OpenAI's form; llama-server
                 0.3.16 honours it on /v1/chat/completions too). Each output is
                 validated with jsonschema (Draft 2020-12 and its FORMAT_CHECKER) when the
                 package is installed: "valid" counts the outputs that parse and validate,
                 "invalid" lists the others (schema, round, first 300 characters).
  unconstrained  the same prompts without response_format, with "ignore_eos": true
                 and max_tokens = the completion tokens of the same (client,
                 round) request in the constrained run just before, so both modes
                 generate the same number of tokens per request and only the
                 masking differs ("matched": true). When the constrained run
                 failed, every request gets FALLBACK_TOKENS (128) ("matched": false).

Metrics: gen_tok_s = generated tokens / wall time (first send to last stream
end); generated tokens are usage.completion_tokens of the final chunk when
present, else the number of content chunks. TTFT p50 (to the first chunk with
content) and ITL p50 (gaps between content chunks) in ms.

Exit status 1 when a mode failed (its line then has "error"); the other lines are still printed.
"""
import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from perflib import REPO, add_client_args, run_or_exit  # noqa: E402
from serving_bench import Client, RequestError, ms, percentile, read_body  # noqa: E402

STREAMS = 16
MAX_TOKENS = 400
FALLBACK_TOKENS = 128
TEMPERATURE = 0.7
CORPUS = REPO / "tests" / "integration" / "schemas"

# Corpus schemas by name (the file name without its number prefix), 16 per set; none uses
# what llama-server 0.3.16 does not honour (format email, items false, prefixItems with items).
SETS = {
    "flat": ["weather_report", "alarm", "http_status", "api_action", "nullable_profile", "sensor_reading",
             "book", "review_sentiment", "commit_message", "flight_search", "bug_triage", "chess_move",
             "match_result", "survey_answer", "discount_rule", "translation_request"],
    "nested": ["shipping_addresses", "todo_list", "decision_tree", "linked_steps", "expression_tree", "shape",
               "recipe", "config_map", "health_check", "reporting_line", "weekly_forecast", "extended_record",
               "json_patch_op", "named_entities", "reminders", "elevation_profile"],
}


def load_corpus():
    """{name: {"prompt", "schema"}} keyed by the file name without its NN_ prefix."""
    corpus = {}
    for path in sorted(CORPUS.glob("*.json")):
        name = path.stem.split("_", 1)[1]
        corpus[name] = json.loads(path.read_text(encoding="utf-8"))
    return corpus


def make_validator():
    """Returns validate(schema, text) -> bool, or None without jsonschema."""
    try:
        from jsonschema import Draft202012Validator
    except ImportError:
        return None
    # The draft's own checker: a bare FormatChecker() holds every draft's formats and
    # its "time" is draft 3's (no fraction, no offset), which rejects RFC 3339 times.
    checker = Draft202012Validator.FORMAT_CHECKER

    def validate(schema, text):
        try:
            instance = json.loads(text)
        except ValueError:
            return False
        return Draft202012Validator(schema, format_checker=checker).is_valid(instance)
    return validate


class Stream:
    """Timings and output of one streamed chat completion."""

    def __init__(self):
        self.t_start = time.perf_counter()
        self.t_end = None
        self.chunk_times = []
        self.text = []
        self.completion_tokens = None
        self.finish_reason = None

    @property
    def generated(self):
        return self.completion_tokens if self.completion_tokens is not None else len(self.chunk_times)

    def on_chunk(self, o, now):
        if "error" in o:
            raise RequestError(f"error chunk: {json.dumps(o)[:500]}")
        for c in o.get("choices") or []:
            content = (c.get("delta") or {}).get("content")
            if content:
                self.chunk_times.append(now)
                self.text.append(content)
            if c.get("finish_reason"):
                self.finish_reason = c["finish_reason"]
        usage = o.get("usage")
        if usage and usage.get("completion_tokens") is not None:
            self.completion_tokens = usage["completion_tokens"]


def sse_payloads(buf):
    """Splits complete SSE events off `buf`; returns ([data payloads], rest)."""
    out = []
    while b"\n\n" in buf:
        event, buf = buf.split(b"\n\n", 1)
        data = b"\n".join(l[5:].lstrip() for l in event.split(b"\n") if l.startswith(b"data:"))
        if data:
            out.append(data)
    return out, buf


class ChatClient(Client):
    """serving_bench's raw HTTP/1.1 client, streaming chat completions."""

    async def stream_chat(self, body):
        """POSTs one streamed chat completion; returns a Stream. Raises RequestError."""
        s = Stream()
        headers, reader, writer = await self.post_stream("/v1/chat/completions", body)
        try:
            buf = b""
            async for piece in read_body(reader, headers):
                now = time.perf_counter()
                payloads, buf = sse_payloads(buf + piece.replace(b"\r\n", b"\n"))
                for data in payloads:
                    if data.strip() == b"[DONE]":
                        s.t_end = time.perf_counter()
                        return s
                    s.on_chunk(json.loads(data), now)
            s.t_end = time.perf_counter()
            return s
        finally:
            writer.close()


def request_body(model, case, seed, constrained, max_tokens, name):
    body = {"model": model, "messages": [{"role": "user", "content": case["prompt"]}], "max_tokens": max_tokens,
            "temperature": TEMPERATURE, "seed": seed, "stream": True, "stream_options": {"include_usage": True}}
    if constrained:
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": name, "schema": case["schema"], "strict": True}}
    else:
        body["ignore_eos"] = True
    return body


async def run_mode(client, cases, rounds, constrained, token_budget):
    """16 closed-loop clients; returns ({(c, r): Stream}, wall seconds).
    token_budget(c, r) gives max_tokens of each request."""
    results = {}

    async def one_client(c):
        name, case = cases[c]
        for r in range(rounds):
            body = request_body(client.model_name, case, r + 1, constrained, token_budget(c, r), name)
            results[(c, r)] = await client.stream_chat(body)

    t0 = time.perf_counter()
    await asyncio.gather(*(one_client(c) for c in range(len(cases))))
    return results, max(s.t_end for s in results.values()) - t0


def summarize(results, wall):
    streams = list(results.values())
    ttft = [s.chunk_times[0] - s.t_start for s in streams if s.chunk_times]
    itl = [b - a for s in streams for a, b in zip(s.chunk_times, s.chunk_times[1:])]
    generated = sum(s.generated for s in streams)
    return {"gen_tok_s": round(generated / wall, 2), "wall_s": round(wall, 3), "requests": len(streams),
            "generated_tokens": generated, "ttft_p50_ms": ms(percentile(ttft, 50)),
            "itl_p50_ms": ms(percentile(itl, 50)),
            "finish_stop": sum(s.finish_reason == "stop" for s in streams)}


def invalid_outputs(results, cases, validate):
    """[{schema, round, output}] of the outputs that do not validate (None without jsonschema)."""
    if validate is None:
        return None
    return [{"schema": cases[c][0], "round": r, "output": "".join(s.text)[:300]}
            for (c, r), s in sorted(results.items()) if not validate(cases[c][1]["schema"], "".join(s.text))]


async def bench_set(client, set_name, cases, rounds, modes, validate):
    """Runs the set constrained, then unconstrained with matched lengths; returns output lines."""
    lines = []
    constrained = None
    if "constrained" in modes:
        line = {"set": set_name, "mode": "constrained"}
        try:
            constrained, wall = await run_mode(client, cases, rounds, True, lambda c, r: MAX_TOKENS)
            invalid = invalid_outputs(constrained, cases, validate)
            line.update(summarize(constrained, wall), valid=None if invalid is None else len(constrained) - len(invalid),
                        invalid=invalid)
        except (RequestError, OSError, asyncio.IncompleteReadError, ValueError) as e:
            constrained = None
            line["error"] = f"{type(e).__name__}: {e}"
        lines.append(line)
    if "unconstrained" in modes:
        line = {"set": set_name, "mode": "unconstrained", "matched": constrained is not None}

        def budget(c, r):
            return max(1, constrained[(c, r)].generated) if constrained else FALLBACK_TOKENS
        try:
            results, wall = await run_mode(client, cases, rounds, False, budget)
            line.update(summarize(results, wall))
        except (RequestError, OSError, asyncio.IncompleteReadError, ValueError) as e:
            line["error"] = f"{type(e).__name__}: {e}"
        lines.append(line)
    return lines


async def resolve_model_name(url, given):
    if given:
        return given
    try:
        status, models = await Client(url, "").get_json("/v1/models")
        return models["data"][0]["id"] if status == 200 else "default"
    except (OSError, RequestError, ValueError, KeyError, IndexError, TypeError):
        return "default"


async def amain(args):
    corpus = load_corpus()
    client = ChatClient(args.url, await resolve_model_name(args.url, args.model_name))
    warm = request_body(client.model_name, {"prompt": "Say hi."}, 1, False, 4, "warmup")
    await client.stream_chat(warm)
    validate = make_validator()
    out = []
    for set_name in args.sets:
        cases = [(name, corpus[name]) for name in SETS[set_name]]
        for line in await bench_set(client, set_name, cases, args.rounds, args.modes, validate):
            out.append({**line, "label": args.label, "rounds": args.rounds, "streams": STREAMS})
    return out


def csv_list(allowed):
    def parse(text):
        items = [x for x in text.split(",") if x]
        bad = [x for x in items if x not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(allowed)}")
        return items
    return parse


def main():
    ap = argparse.ArgumentParser(description="constrained-decoding benchmark client (see the module docstring)")
    add_client_args(ap)
    ap.add_argument("--sets", type=csv_list(list(SETS)), default=list(SETS), help="comma-separated: " + ", ".join(SETS))
    ap.add_argument("--modes", type=csv_list(["constrained", "unconstrained"]), default=["constrained", "unconstrained"])
    ap.add_argument("--rounds", type=int, default=2, help="requests per client (default 2)")
    args = ap.parse_args()
    lines = run_or_exit(f"bench_structured: against {args.url}", lambda: asyncio.run(amain(args)),
                        (RequestError, OSError, asyncio.IncompleteReadError, ValueError))
    for line in lines:
        print(json.dumps(line), flush=True)
    sys.exit(1 if any("error" in line for line in lines) else 0)


if __name__ == "__main__":
    main()
