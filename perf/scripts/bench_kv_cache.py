#!/usr/bin/env python3
"""The KV cache's element types side by side (issue 40), with llama.cpp at the
same cache types, in one run, same model files and threads.

Parts (--parts, comma-separated; default all):
  ppl      perplexity over perf/data's corpus (Debian's license texts, see
           corpus() below), --ppl-ctx tokens per chunk: `spate perplexity
           --kv-cache-dtype T` for each type, and llama.cpp's llama-perplexity
           -ctk T -ctv T (-fa on; f16 and q8_0: ggml has no fp8 cache type).
           Reported: PPL, its change against f16 in %, and spate/llama.cpp.
  decode   single-sequence decode tok/s after a context of 1k, 4k and 8k
           tokens: spate_bench --only tg --depth D --kv-cache-dtype T against
           llama-bench -p 0 -n TG -d D -ctk T -ctv T -fa 1 (medians of --reps).
  serving  16 concurrent streams, each a distinct ~4k-token prompt and
           --serve-tokens tokens (ignore_eos), through `spate serve` at the
           same --kv-cache-memory for every type: aggregate generated tok/s
           and TTFT p50 (median of --reps rounds). A smaller cache type fits
           more of the 16 sequences at once. llama-server (-fa on, -ctk/-ctv T)
           runs the same rounds with -c set to the tokens that fit the same
           bytes, and -np as many slots (<= 16) as hold a whole request, since
           it gives each slot c / np tokens (--no-peer-serving: without it).
  disk     the prefix cache's disk tier: a ~4k-token prefix plus a question
           through a server with an empty --kv-cache-dir (cold: TTFT of the
           whole prompt, the blocks go to disk), the server stopped and a new
           one started over the same directory, then the prefix plus another
           question (TTFT from disk, cached_tokens), then a third (from
           memory). A distinct prefix per repetition; default model, f16.

Output: one JSON object per measurement appended to --out (default
perf/results/kv-dtypes-DATE.jsonl) and a table per part on stdout.

Usage: perf/scripts/bench_kv_cache.py [--models smollm2,gemma] [--dtypes f16,q8_0,fp8_e5m2]
          [--parts ppl,decode,serving,disk] [--threads 2] [--reps 3] [--depths 1024,4096,8192]
          [--tg 64] [--ppl-ctx 512] [--ppl-chunks 20] [--serve-kv 768MiB] [--serve-tokens 32] [--no-peer-serving]
Env: SPATE_BIN (default build/spate), BUILD_DIR (spate_bench: BUILD_DIR/perf/spate_bench,
default build), PEER_BIN (llama.cpp 0.3.36's bin directory, with llama-perplexity and
llama-bench, llama-server; default ~/.cache/spate/peer/0.3.36/bin; build llama-perplexity with
PEER_TARGETS="llama-perplexity" perf/peer/build_llama_cpp.sh).
"""
import argparse
import concurrent.futures
import datetime
import http.client
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from perflib import REPO, Server, append_jsonl, json_objects, median, print_table, ratio  # noqa: E402

MODELS = {
    "smollm2": Path.home() / ".cache/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma": Path.home() / ".cache/spate/models/gemma-3-270m-q4_k_m.gguf",
}
LLAMA_TYPES = {"f16", "q8_0"}  # the cache types llama.cpp shares with spate
# Serving against llama-server at the same bytes: only where every layer keeps a
# full cache in both (llama.cpp gives Gemma 3's sliding-window layers a smaller one).
PEER_SERVING_MODELS = {"smollm2"}
PEER_SLOT_TOKENS = 4112  # a serving prompt (<= 4,047 SmolLM2 tokens) and its tokens, in llama-server's 256-token steps
LICENSES = ["GPL-3", "GFDL-1.3", "Apache-2.0", "MPL-2.0", "Artistic", "CC0-1.0"]


def corpus(out_dir: Path) -> Path:
    """The perplexity text: Debian's license texts (base-files, on every machine), concatenated."""
    p = out_dir / "kv-ppl-corpus.txt"
    if not p.exists():
        p.write_text("".join(Path("/usr/share/common-licenses", n).read_text() for n in LICENSES))
    return p


def run(argv, timeout=3600):
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({r.returncode}): {r.stderr[-800:]}")
    return r.stdout, r.stderr


def llama_ppl(text: str) -> float:
    for line in text.splitlines():
        if "Final estimate: PPL =" in line:
            return float(line.split("PPL =")[1].split("+/-")[0])
    raise RuntimeError("no 'Final estimate' in llama-perplexity's output")


def part_ppl(a, env, out):
    rows = []
    for name in a.models:
        base = None
        for dt in a.dtypes:
            so, _ = run([env["spate"], "perplexity", "--model", MODELS[name], "--file", env["corpus"], "--ctx-size", a.ppl_ctx,
                         "--chunks", a.ppl_chunks, "--threads", a.threads, "--kv-cache-dtype", dt, "--json"])
            spate = json.loads(so.strip().splitlines()[-1])
            peer = None
            if dt in LLAMA_TYPES:
                po, pe = run([Path(env["peer"]) / "llama-perplexity", "-m", MODELS[name], "-f", env["corpus"], "-c", a.ppl_ctx, "-b",
                              a.ppl_ctx, "--chunks", a.ppl_chunks, "-t", a.threads, "-ctk", dt, "-ctv", dt, "-fa", "on"])
                peer = llama_ppl(po + pe)
            base = spate["ppl"] if dt == "f16" else base
            rec = {"part": "ppl", "model": name, "dtype": dt, "ctx": a.ppl_ctx, "chunks": spate["chunks"], "spate_ppl": spate["ppl"],
                   "spate_ppl_error": spate["ppl_error"], "llamacpp_ppl": peer,
                   "vs_f16_pct": None if base is None else 100.0 * (spate["ppl"] / base - 1.0)}
            append_jsonl(out, [rec])
            rows.append([name, dt, f"{spate['ppl']:.4f} ± {spate['ppl_error']:.4f}",
                         "" if rec["vs_f16_pct"] is None else f"{rec['vs_f16_pct']:+.2f}%", "" if peer is None else f"{peer:.4f}",
                         "" if peer is None else f"{spate['ppl'] / peer:.4f}"])
    print_table(["model", "KV", "spate PPL", "vs f16", "llama.cpp PPL", "spate/llama.cpp"], rows)


def part_decode(a, env, out):
    rows = []
    for name in a.models:
        for depth in a.depths:
            f16_tok_s = None
            for dt in a.dtypes:
                so, _ = run([env["bench"], "--model", MODELS[name], "--threads", a.threads, "--reps", a.reps, "--only", "tg", "--tg", a.tg,
                             "--depth", depth, "--kv-cache-dtype", dt])
                spate = next(o for o in json_objects(so) if o.get("metric", "").startswith("tg"))["tok_s"]
                peer = None
                if dt in LLAMA_TYPES:
                    po, _ = run([Path(env["peer"]) / "llama-bench", "-m", MODELS[name], "-t", a.threads, "-r", a.reps, "-p", 0, "-n", a.tg,
                                 "-d", depth, "-ctk", dt, "-ctv", dt, "-fa", 1, "-o", "jsonl"])
                    peer = next(o["avg_ts"] for o in map(json.loads, filter(str.strip, po.splitlines())) if o.get("n_gen") == a.tg)
                f16_tok_s = spate if dt == "f16" else f16_tok_s
                rec = {"part": "decode", "model": name, "dtype": dt, "depth": depth, "tg": a.tg, "threads": a.threads, "spate_tok_s": spate,
                       "llamacpp_tok_s": peer, "vs_f16": ratio(spate, f16_tok_s), "spate_over_llamacpp": ratio(spate, peer)}
                append_jsonl(out, [rec])
                rows.append([name, depth, dt, f"{spate:.1f}", "" if rec["vs_f16"] is None else f"{rec['vs_f16']:.2f}x",
                             "" if peer is None else f"{peer:.1f}", "" if peer is None else f"{spate / peer:.2f}x"])
    print_table(["model", "context", "KV", "spate tok/s", "vs f16", "llama.cpp tok/s", "spate/llama.cpp"], rows)


def long_prompts(n, n_words, seed):
    """n distinct prompts of about n_words words (a shared vocabulary, shuffled per prompt)."""
    words = Path("/usr/share/common-licenses/GPL-3").read_text().split()
    rng = random.Random(seed)
    return [f"Document {i}: " + " ".join(rng.choice(words) for _ in range(n_words)) + "\nSummary:" for i in range(n)]


def stream_one(url, prompt, max_tokens, usage=None):
    """One streamed /v1/completions request: (TTFT s, generated tokens); usage (a dict) gets the final usage."""
    host, port = url.split("//")[1].split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=3600)
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
                                                    "stream": True, "stream_options": {"include_usage": True}}),
              {"content-type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read()[:300]!r}")
    ttft, n, n_chunks = None, None, 0
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        o = json.loads(line[6:])
        if o.get("choices") and o["choices"][0].get("text"):
            n_chunks += 1
            ttft = time.perf_counter() - t0 if ttft is None else ttft
        if o.get("usage"):
            n = o["usage"]["completion_tokens"]
            if usage is not None:
                usage.update(o["usage"])
    c.close()
    return ttft, n_chunks if n is None else n  # one token per chunk when no usage came


def kv_bytes_per_token(model: Path, dtype: str) -> float:
    """KV bytes per token (all layers, K and V) of a llama-architecture GGUF at a cache type."""
    from gguf import GGUFReader
    r = GGUFReader(str(model))
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()

    def num(key):
        return int(r.fields[f"{arch}.{key}"].parts[-1][0])
    key = f"{arch}.attention.key_length"
    head_dim = int(r.fields[key].parts[-1][0]) if key in r.fields else num("embedding_length") // num("attention.head_count")
    per_value = {"f16": 2.0, "f32": 4.0, "q8_0": 34 / 32, "fp8_e5m2": 1.0}[dtype]
    return num("block_count") * 2 * num("attention.head_count_kv") * head_dim * per_value


def mib(text: str) -> int:
    return int(text.removesuffix("MiB")) if text.endswith("MiB") else int(text.removesuffix("GiB")) * 1024


def serving_rounds(url, a):
    """--reps rounds of 16 concurrent streams: (median tok/s, median TTFT p50 s)."""
    tok_s, ttfts = [], []
    for rep in range(a.reps):
        prompts = long_prompts(16, 3300, seed=1000 * rep + 1)  # ~4k tokens each
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            res = list(ex.map(lambda p: stream_one(url, p, a.serve_tokens), prompts))
        wall = time.perf_counter() - t0
        tok_s.append(sum(n for _, n in res) / wall)
        ttfts.append(median([t for t, _ in res if t is not None]))
    return median(tok_s), median(ttfts)


def part_serving(a, env, out):
    """spate serve per type at --serve-kv; llama-server at the same cache types
    and bytes (ggml's f16 and q8_0 take as many bytes per value as spate's)."""
    rows = []
    for name in a.models:
        f16_tok_s = None
        for dt in a.dtypes:
            srv = Server([env["spate"], "serve", "--model", MODELS[name], "--port", "{port}", "--threads", a.threads, "--kv-cache-memory",
                          a.serve_kv, "--kv-cache-dtype", dt, "--no-enable-prefix-caching", "--max-num-seqs", 16])
            with srv:
                s, ttft = serving_rounds(srv.url, a)
            peer, peer_ttft, ctx, n_slots = None, None, None, None
            if dt in LLAMA_TYPES and name in PEER_SERVING_MODELS and not a.no_peer_serving:
                ctx = int(mib(a.serve_kv) * 2**20 // kv_bytes_per_token(MODELS[name], dt))
                # llama-server gives each slot ctx / np tokens: as many slots as hold a whole request.
                n_slots = max(1, min(16, ctx // PEER_SLOT_TOKENS))
                peer_srv = Server([Path(env["peer"]) / "llama-server", "-m", MODELS[name], "--port", "{port}", "-t", a.threads,
                                   "-c", ctx, "-np", n_slots, "-ctk", dt, "-ctv", dt, "-fa", "on", "--cache-ram", 0], ready_path="/health")
                with peer_srv:
                    peer, peer_ttft = serving_rounds(peer_srv.url, a)
            f16_tok_s = s if dt == "f16" else f16_tok_s
            rec = {"part": "serving", "model": name, "dtype": dt, "streams": 16, "prompt_words": 3300, "max_tokens": a.serve_tokens,
                   "kv_cache_memory": a.serve_kv, "tok_s": s, "ttft_p50_s": ttft, "vs_f16": ratio(s, f16_tok_s), "reps": a.reps,
                   "llamacpp_ctx": ctx, "llamacpp_slots": n_slots if peer is not None else None, "llamacpp_tok_s": peer, "llamacpp_ttft_p50_s": peer_ttft}
            append_jsonl(out, [rec])
            rows.append([name, dt, a.serve_kv, f"{s:.1f}", f"{ttft:.2f}", "" if rec["vs_f16"] is None else f"{rec['vs_f16']:.2f}x",
                         "" if peer is None else f"{peer:.1f} (-c {ctx} -np {n_slots})", "" if peer is None else f"{peer_ttft:.2f}",
                         "" if peer is None else f"{s / peer:.2f}x"])
    print_table(["model", "KV", "--kv-cache-memory", "tok/s (16 streams, 4k prompts)", "TTFT p50 s", "vs f16", "llama-server tok/s",
                 "llama-server TTFT p50 s", "spate/llama-server"], rows)


def part_disk(a, env, out):
    import tempfile
    rows = []
    name = a.models[0]
    cold, disk, mem, cached, prompt = [], [], [], [], []
    for rep in range(a.reps):
        prefix = long_prompts(1, 3300, seed=5000 + rep)[0]  # ~4k tokens
        with tempfile.TemporaryDirectory(dir=str(Path(env["corpus"]).parent)) as d:
            argv = [env["spate"], "serve", "--model", MODELS[name], "--port", "{port}", "--threads", a.threads, "--kv-cache-dir", d]
            with Server(argv):
                pass  # warm the page cache of the model file
            srv = Server(argv)
            with srv:
                cold.append(stream_one(srv.url, prefix + "\nQuestion one?", 4)[0])
            srv = Server(argv)  # a restart: the memory tier is empty
            with srv:
                u = {}
                disk.append(stream_one(srv.url, prefix + "\nQuestion two?", 4, usage=u)[0])
                cached.append((u.get("prompt_tokens_details") or {}).get("cached_tokens", 0))
                mem.append(stream_one(srv.url, prefix + "\nQuestion three?", 4)[0])
                prompt.append(u.get("prompt_tokens"))
    rec = {"part": "disk", "model": name, "prompt_tokens": prompt, "cached_tokens": cached, "ttft_cold_s": median(cold),
           "ttft_disk_s": median(disk), "ttft_memory_s": median(mem), "disk_over_cold": ratio(median(disk), median(cold)),
           "memory_over_cold": ratio(median(mem), median(cold)), "reps": a.reps}
    append_jsonl(out, [rec])
    rows.append([name, "/".join(map(str, prompt)), "/".join(map(str, cached)), f"{median(cold):.3f}", f"{median(disk):.3f} ({rec['disk_over_cold']:.2f}x)",
                 f"{median(mem):.3f} ({rec['memory_over_cold']:.2f}x)"])
    print_table(["model", "prompt tokens", "cached (disk)", "TTFT cold s", "TTFT after restart s", "TTFT memory hit s"], rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="smollm2,gemma")
    ap.add_argument("--dtypes", default="f16,q8_0,fp8_e5m2")
    ap.add_argument("--parts", default="ppl,decode,serving,disk")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--depths", default="1024,4096,8192")
    ap.add_argument("--tg", type=int, default=64)
    ap.add_argument("--ppl-ctx", type=int, default=512)
    ap.add_argument("--ppl-chunks", type=int, default=20)
    ap.add_argument("--serve-kv", default="768MiB")
    ap.add_argument("--serve-tokens", type=int, default=32)
    ap.add_argument("--no-peer-serving", action="store_true", help="serving part without llama-server")
    ap.add_argument("--out", default=str(REPO / "perf/results" / f"kv-dtypes-{datetime.date.today():%Y%m%d}.jsonl"))
    a = ap.parse_args()
    a.models = a.models.split(",")
    a.dtypes = a.dtypes.split(",")
    a.depths = [int(d) for d in a.depths.split(",")]
    build = Path(os.environ.get("BUILD_DIR", REPO / "build"))
    env = {"spate": os.environ.get("SPATE_BIN", str(build / "spate")), "bench": str(build / "perf/spate_bench"),
           "peer": os.environ.get("PEER_BIN", str(Path.home() / ".cache/spate/peer/0.3.36/bin")),
           "corpus": corpus(build)}
    append_jsonl(a.out, [{"part": "run", "date": datetime.datetime.now().isoformat(timespec="seconds"), "threads": a.threads,
                          "reps": a.reps, "models": a.models, "dtypes": a.dtypes, "loadavg": os.getloadavg()[0]}])
    for part in a.parts.split(","):
        {"ppl": part_ppl, "decode": part_decode, "serving": part_serving, "disk": part_disk}[part](a, env, a.out)


if __name__ == "__main__":
    main()
