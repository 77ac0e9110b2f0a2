#!/usr/bin/env python3
"""Medians, ratios and the summary table of a side-by-side results file (JSON lines
written by bench_vs_llamacpp.sh, bench_serving.sh, bench_structured.sh or bench_moe.sh).

Usage: perf/scripts/summarize.py vs_llamacpp|serving|structured|moe FILE [--peer NAME]
       perf/scripts/summarize.py grid FILE...   (bench_moe.sh files of several models and levels)

Reads the "kind":"run" and "kind":"sample" (and "failure") records, appends the
"kind":"median" records (and for vs_llamacpp "batch_gain") to FILE, and prints a
table on stdout. Re-running it on a finished file appends the medians again;
readers take the last ones. --peer names the peer's engine field (default llama.cpp).
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from perflib import (append_jsonl, fmt, fmt_ratio, load_warning, median, peak_load, print_table, ratio,  # noqa: E402
                     read_jsonl, run_header, spread)


def load(path):
    recs = read_jsonl(path)
    run = run_header([r for r in recs if r.get("kind") == "run"])
    samples = [r for r in recs if r.get("kind") == "sample"]
    failures = [r for r in recs if r.get("kind") == "failure"]
    return recs, run, samples, failures


def print_failures(failures, what):
    if failures:
        print(f"{len(failures)} run(s) FAILED: " + "; ".join(what(f) for f in failures))


def vs_llamacpp(path, peer):
    recs, run, samples, _ = load(path)
    pp, tg, npl = run["pp"], run["tg"], run["bd_npl"]
    metrics = [f"pp{pp}", f"tg{tg}", f"bd{npl}"]
    models = [r for r in recs if r.get("kind") == "model"]

    def values(model, engine, metric):
        return [s["tok_s"] for s in samples if s["model"] == model and s["engine"] == engine and s["metric"] == metric]

    summary, rows = [], []
    for m in models:
        name = m["model"]
        for metric in metrics:
            s, p = values(name, "spate", metric), values(name, peer, metric)
            o = {"kind": "median", "model": name, "metric": metric, "spate": median(s), peer: median(p),
                 "ratio": ratio(median(s), median(p)), "spate_samples": s, "peer_samples": p}
            summary.append(o)
            rows.append([name, metric, fmt(o["spate"]), fmt(o[peer]), fmt_ratio(o["ratio"]), spread(s), spread(p)])
        gains = {e: ratio(median(values(name, e, f"bd{npl}")), median(values(name, e, f"tg{tg}"))) for e in ("spate", peer)}
        summary.append({"kind": "batch_gain", "model": name, "spate_bd_over_tg": gains["spate"],
                        "peer_bd_over_tg": gains[peer]})
    append_jsonl(path, summary)

    print(f"\nspate vs {peer} {run.get('peer_version', '?')}, {run.get('threads')} threads, "
          f"median of {run.get('reps')} interleaved rounds; load average before {run.get('loadavg_before')}, "
          f"after {run.get('loadavg_after')} ({run.get('ncpu')} cpus)")
    print_table(["model", "metric", "spate tok/s", f"{peer} tok/s", "spate/peer", "spate min-max", "peer min-max"], rows)
    print()
    for o in summary:
        if o["kind"] == "batch_gain":
            print(f"{o['model']}: bd{npl}/tg{tg} spate {fmt_ratio(o['spate_bd_over_tg'])}, "
                  f"{peer} {fmt_ratio(o['peer_bd_over_tg'])}")
    for m in models:
        print(f"{m['model']}: load average before {m['loadavg_before']}, after {m['loadavg_after']}")
    load_warning(peak_load(samples, "loadavg"), int(run.get("ncpu") or 1))


SERVING_METRICS = {
    "throughput": ["gen_tok_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "e2e_p50_ms"],
    "prefix": ["ttft_turn1_ms", "ttft_turn2_ms", "ttft_ratio"],
    "chunked": ["itl_p99_alone_ms", "itl_p99_mixed_ms", "itl_p99_ratio", "itl_max_alone_ms", "itl_max_mixed_ms",
                "itl_max_ratio", "long_ttft_ms"],
}
SERVING_TARGETS = [("prefix", "ttft_ratio", "spate", lambda x: x >= 5, "spate prefix TTFT turn1/turn2 >= 5"),
                   ("chunked", "itl_p99_ratio", "spate", lambda x: x < 3, "spate chunked ITL p99 mixed/alone < 3"),
                   ("throughput", "gen_tok_s", "http_over_engine", lambda x: x >= 0.95,
                    "spate HTTP tok/s >= 0.95 x engine")]


def serving(path, peer):
    _, run, samples, failures = load(path)

    def values(engine, transport, scenario, metric):
        return [s[metric] for s in samples if s["engine"] == engine and s["transport"] == transport
                and s["scenario"] == scenario and s.get(metric) is not None]

    summary, rows = [], []
    for sc, ms in SERVING_METRICS.items():
        for m in ms:
            s, p, e = values("spate", "http", sc, m), values(peer, "http", sc, m), values("spate", "engine", sc, m)
            if not (s or p or e):
                continue
            o = {"kind": "median", "scenario": sc, "metric": m, "spate": median(s), peer: median(p),
                 "spate_over_peer": ratio(median(s), median(p)), "spate_engine": median(e),
                 "http_over_engine": ratio(median(s), median(e)), "spate_samples": s, "peer_samples": p,
                 "engine_samples": e}
            summary.append(o)
            rows.append([sc, m, fmt(o["spate"]), fmt(o[peer]), fmt_ratio(o["spate_over_peer"]), fmt(o["spate_engine"]),
                         fmt_ratio(o["http_over_engine"]), spread(s), spread(p)])
    append_jsonl(path, summary)

    print(f"\nserving: spate vs {peer} {run.get('peer_version') or '-'} on {run.get('model')}, "
          f"{run.get('threads')} threads, median of {run.get('reps')} reps; load average before "
          f"{run.get('loadavg_before')}, after {run.get('loadavg_after')} ({run.get('ncpu')} cpus)")
    print("(tok/s and *_ratio: higher is better; *_ms: lower is better; 'engine' = spate in-process, no HTTP)")
    print_table(["scenario", "metric", "spate", peer, "spate/peer", "spate engine", "http/engine", "spate min-max",
                 "peer min-max"], rows)
    print()
    by_key = {(o["scenario"], o["metric"]): o for o in summary}
    for sc, m, key, ok, what in SERVING_TARGETS:
        o = by_key.get((sc, m))
        if o and o.get(key) is not None:
            print(f"target: {what}: {o[key]:.2f} -> {'MET' if ok(o[key]) else 'NOT MET'}")
    for eng in ("spate", peer):
        chunked = [s for s in samples if s["scenario"] == "chunked" and s["engine"] == eng]
        if chunked:
            n_ov = sum(1 for s in chunked if s.get("long_overlapped"))
            print(f"chunked, {eng}: the long prompt's first token came before any stream ended in "
                  f"{n_ov}/{len(chunked)} runs")
    load_warning(peak_load(samples), int(run.get("ncpu") or 1))
    print_failures(failures, lambda f: f"{f.get('engine')} {f.get('scenario')} rep {f.get('rep')}")


def structured(path, peer):
    _, run, samples, failures = load(path)

    def values(engine, s, mode):
        return [x["gen_tok_s"] for x in samples if x["engine"] == engine and x["set"] == s and x["mode"] == mode
                and x.get("gen_tok_s") is not None]

    def valid(engine, s):
        v = [x for x in samples if x["engine"] == engine and x["set"] == s and x["mode"] == "constrained"]
        if not v or any(x.get("valid") is None for x in v):
            return "-"
        return f"{sum(x['valid'] for x in v)}/{sum(x['requests'] for x in v)}"

    summary, rows = [], []
    for s in run["sets"].split(","):
        v = {(e, m): values(e, s, m) for e in ("spate", peer) for m in ("constrained", "unconstrained")}
        med = {k: median(x) for k, x in v.items()}
        o = {"kind": "median", "set": s, "metric": "gen_tok_s",
             "spate_constrained": med["spate", "constrained"], "spate_unconstrained": med["spate", "unconstrained"],
             "spate_c_over_u": ratio(med["spate", "constrained"], med["spate", "unconstrained"]),
             "peer_constrained": med[peer, "constrained"], "peer_unconstrained": med[peer, "unconstrained"],
             "peer_c_over_u": ratio(med[peer, "constrained"], med[peer, "unconstrained"]),
             "spate_over_peer_constrained": ratio(med["spate", "constrained"], med[peer, "constrained"]),
             "samples": {f"{e}_{m}": x for (e, m), x in v.items()},
             "valid": {"spate": valid("spate", s), peer: valid(peer, s)}}
        summary.append(o)
        rows.append([s, fmt(o["spate_constrained"]), fmt(o["spate_unconstrained"]), fmt_ratio(o["spate_c_over_u"]),
                     fmt(o["peer_constrained"]), fmt(o["peer_unconstrained"]), fmt_ratio(o["peer_c_over_u"]),
                     fmt_ratio(o["spate_over_peer_constrained"]), o["valid"]["spate"], o["valid"][peer]])
    append_jsonl(path, summary)

    print(f"\nconstrained decoding: spate vs {peer} {run.get('peer_version') or '-'} on {run.get('model')}, "
          f"{run.get('threads')} threads, 16 streams x {run.get('rounds')} rounds per set, median of "
          f"{run.get('reps')} reps; load average before {run.get('loadavg_before')}, after "
          f"{run.get('loadavg_after')} ({run.get('ncpu')} cpus)")
    print("(generated tok/s, higher is better; c/u = constrained / unconstrained with the same tokens per request)")
    print_table(["set", "spate c", "spate u", "spate c/u", "peer c", "peer u", "peer c/u", "spate/peer c",
                 "valid spate", "valid peer"], rows)
    unmatched = [x for x in samples if x["mode"] == "unconstrained" and not x.get("matched")]
    if unmatched:
        print(f"note: {len(unmatched)} unconstrained run(s) had no constrained run to match lengths with "
              f"(fixed max_tokens): their c/u ratio is not like for like")
    load_warning(peak_load(samples), int(run.get("ncpu") or 1))
    print_failures(failures, lambda f: f"{f.get('engine')} {f.get('set', '')} {f.get('mode', f.get('what', ''))} "
                                       f"rep {f.get('rep')}: {str(f.get('error', ''))[:120]}")


MOE_ENGINES = ("spate", "llama.cpp", "ik_llama.cpp", "ik_llama.cpp-plain")


def moe_key(engine):
    """The field of an engine's figure in bench_moe's median records: spate, peer_llama_cpp, ..."""
    return engine if engine == "spate" else "peer_" + engine.replace(".", "_").replace("-", "_")


def moe(path, _peer):
    recs, run, samples, failures = load(path)
    engines = [e for e in MOE_ENGINES if any(s["engine"] == e for s in samples)]
    npl = run["bd_npl"]
    metrics = [m for m in (f"pp{run['pp']}", f"tg{run['tg']}", f"bd{npl}", f"bd{npl}_rand", f"bd{npl}_tok0", "serve16")
               if any(s["metric"] == m for s in samples)]

    def values(engine, metric):
        return [s.get("tok_s", s.get("gen_tok_s")) for s in samples if s["engine"] == engine and s["metric"] == metric]

    pairs = [(a, b) for a, b in (("spate", "llama.cpp"), ("spate", "ik_llama.cpp"), ("spate", "ik_llama.cpp-plain"),
                                 ("ik_llama.cpp", "llama.cpp"))
             if a in engines and b in engines]
    summary, rows = [], []
    for m in metrics:
        v = {e: values(e, m) for e in engines}
        med = {e: median(x) for e, x in v.items()}
        o = {"kind": "median", "model": run.get("model"), "metric": m, **{moe_key(e): med[e] for e in engines}}
        for a, b in pairs:
            o[f"{moe_key(a)}_over_{moe_key(b)}"] = ratio(med[a], med[b])
        o["samples"] = {moe_key(e): x for e, x in v.items()}
        summary.append(o)
        rows.append([m] + [f"{fmt(med[e])} ({spread(v[e])})" for e in engines]
                    + [fmt_ratio(o[f"{moe_key(a)}_over_{moe_key(b)}"]) for a, b in pairs])

    probes = [r["read_gb_s"] for r in recs if r.get("kind") == "probe" and r.get("read_gb_s")]
    bw = {"kind": "bandwidth", "model": run.get("model"), "read_gb_s": median(probes), "read_gb_s_samples": probes}
    tg = f"tg{run['tg']}"
    try:
        from roofline_share import work_per_token
        w = work_per_token(run["model_path"])
        bw["bytes_per_token"] = w["bytes"] + w["embd_row_bytes"]
        bw["experts"] = f"{w['n_expert_used']} of {w['n_expert']}"
    except (ImportError, OSError, KeyError) as e:
        print(f"no bytes per token ({type(e).__name__}: {e}): no bandwidth shares")
    if bw.get("bytes_per_token") and bw["read_gb_s"]:
        for e in engines:
            t = median(values(e, tg))
            bw[f"{tg}_share_{moe_key(e)}"] = None if t is None else t * bw["bytes_per_token"] / (bw["read_gb_s"] * 1e9)
    summary.append(bw)
    append_jsonl(path, summary)

    opts = {e: sorted({f"{s['metric']}: {s['options']}" for s in samples if s["engine"] == e and s.get("options")})
            for e in engines}
    print(f"\nSide by side on {run.get('model')} (spate {run.get('spate_commit', '?')}, ISA {run.get('isa', 'native')}), "
          f"{run.get('threads')} "
          f"threads, median (min-max) of "
          f"{run.get('reps')} rounds (serving {run.get('serve_reps', run.get('reps'))}), tok/s; load average before {run.get('loadavg_before')}, after "
          f"{run.get('loadavg_after')} ({run.get('ncpu')} cpus)")
    for e in engines:
        if opts[e]:
            print(f"  {e} options: " + "; ".join(opts[e]))
    print_table(["metric"] + list(engines) + [f"{a}/{b}" for a, b in pairs], rows)
    if bw.get("bytes_per_token") and bw["read_gb_s"]:
        print(f"\n{tg} share of read bandwidth ({bw['bytes_per_token'] / 1e6:.1f} MB per token: attention, router, "
              f"{bw['experts']} experts, output, one embedding row; read {fmt(bw['read_gb_s'])} GB/s, "
              f"probes {spread(probes)}): " + ", ".join(f"{e} {100 * bw[f'{tg}_share_{moe_key(e)}']:.1f}%"
                                                        for e in engines if bw.get(f"{tg}_share_{moe_key(e)}")))
    caches = sorted({s.get("cache", "as-found") for s in samples if s["metric"] == "ready_s"})
    for cache in caches:
        ready = {e: [s["seconds"] for s in samples if s["engine"] == e and s["metric"] == "ready_s"
                     and s.get("cache", "as-found") == cache] for e in engines}
        append_jsonl(path, [{"kind": "median", "model": run.get("model"), "metric": "ready_s", "cache": cache,
                             **{moe_key(e): median(x) for e, x in ready.items() if x}}])
        print(f"start-up to ready, {cache} page cache (s, lower is better): " +
              ", ".join(f"{e} {fmt(median(x))} ({spread(x)})" for e, x in ready.items() if x))
    mem = [s["mem_available_mb"] for s in samples if s.get("mem_available_mb") is not None]
    if mem:
        print(f"lowest MemAvailable after a figure: {min(mem)} MB")
    load_warning(max([peak_load(samples, "loadavg")] + [0.0]), int(run.get("ncpu") or 1))
    print_failures(failures, lambda f: f"{f.get('engine')} {f.get('what')} round {f.get('round')}")


# grid: per ISA level, one row per model file, spate's median and its ratio to each peer. bd16 is
# set against each peer's own form (llama.cpp: random tokens, ik_llama.cpp: token 0); "ik" is the
# faster of ik_llama.cpp's best options and its defaults (ik_llama.cpp-plain) on each metric.
GRID_METRICS = (("pp512", "pp512", "pp512"), ("tg128", "tg128", "tg128"), ("bd16", "bd16_rand", "bd16_tok0"))


def grid_shares(recs, run, med):
    """spate's tg128 / pp512 / bd16 as shares of the rooflines probed around the run's rounds
    (roofline_share.shares_of at the run's level; the kernel shares where the probe has the mixes)."""
    try:
        from roofline_share import shares_of, work_per_token
        w = work_per_token(run["model_path"])
    except (ImportError, OSError, KeyError):
        return None
    probes = [r for r in recs if r.get("kind") == "probe"]
    if not probes:
        return None
    keys = {k for r in probes for k, v in r.items() if isinstance(v, (int, float)) and k != "round"}
    probe = {k: median([r[k] for r in probes if k in r]) for k in keys}
    isa = "avx2" if run.get("isa") == "avx2" else "avx512"
    sh = shares_of(w, probe, med("spate", "tg128"), med("spate", "pp512"), med("spate", "bd16_rand"), isa)
    pct = lambda k: f"{100 * sh[k]:.0f}%" if sh.get(k) is not None else "-"
    return [pct("tg128_bandwidth"), f"{pct('pp512_kernel')} ({pct('pp512_compute')})",
            f"{pct('bd16_kernel')} ({pct('bd16_compute')})", f"{probe.get('read_gb_s', 0):.1f}"]


def grid(paths):
    tables, share_rows = {}, {}
    for path in paths:
        recs, run, samples, failures = load(path)
        med = lambda e, m: median([s.get("tok_s") for s in samples if s["engine"] == e and s["metric"] == m])
        row = [run.get("model", Path(path).name).removesuffix(".gguf")]
        for name, m_llama, m_ik in GRID_METRICS:
            spate_llama, spate_ik = med("spate", m_llama), med("spate", m_ik)
            iks = [v for v in (med("ik_llama.cpp", m_ik), med("ik_llama.cpp-plain", m_ik)) if v is not None]
            ik = max(iks) if iks else None
            llama = med("llama.cpp", m_llama)
            row.append(f"{fmt(spate_llama)}: {fmt_ratio(ratio(spate_ik, ik))} / {fmt_ratio(ratio(spate_llama, llama))}")
        if failures:
            row[0] += f" ({len(failures)} failed)"
        tables.setdefault(run.get("isa", "native"), []).append(row)
        sh = grid_shares(recs, run, med)
        if sh:
            share_rows.setdefault(run.get("isa", "native"), []).append([row[0]] + sh)
    for isa, rows in tables.items():
        print(f"\nISA {isa}: spate tok/s: spate / ik_llama.cpp (the better of best options and defaults) / "
              "llama.cpp 0.3.36, medians")
        print_table(["model"] + [m[0] for m in GRID_METRICS], rows)
        if share_rows.get(isa):
            print(f"\nISA {isa}: spate's shares of the rooflines probed around the rounds (median probe): tg128 of "
                  "read bandwidth; pp512 and bd16 of the level's kernel-mix ceiling (of the int8 peak)")
            print_table(["model", "tg128 bandwidth", "pp512 kernel (int8)", "bd16 kernel (int8)", "read GB/s"],
                        share_rows[isa])


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "grid":
        return grid(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["vs_llamacpp", "serving", "structured", "moe"])
    ap.add_argument("file")
    ap.add_argument("--peer", default="llama.cpp")
    a = ap.parse_args()
    {"vs_llamacpp": vs_llamacpp, "serving": serving, "structured": structured, "moe": moe}[a.kind](a.file, a.peer)


if __name__ == "__main__":
    main()
