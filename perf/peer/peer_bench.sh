#!/usr/bin/env bash
# llama.cpp peer figures on N threads (default 2), one JSON object per metric
# on stdout, e.g.
#   {"engine":"llama.cpp","metric":"pp512","tok_s":1234.5,...}
#
# Usage: perf/peer/peer_bench.sh [MODEL]
#   MODEL defaults to ~/.cache/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf
# Env:
#   PEER_BIN   dir with llama-bench / llama-batched-bench (default: output of
#              perf/peer/build_llama_cpp.sh, which builds them if missing)
#   THREADS    threads (default 2)
#   REPS       repetitions (default 5); tok_s is the median over REPS
#   BATCH_NPL  parallel sequences for the batched decode metric (default 16)
#   BATCH_NPP  prompt tokens per sequence (default 32)
#   BATCH_NTG  generated tokens per sequence (default 64)
#
# Metrics:
#   pp512             llama-bench -p 512 -n 0 -t T -r REPS        (prompt processing)
#   tg128             llama-bench -p 0 -n 128 -t T -r REPS        (single-sequence decode)
#   batched_tg_b1     llama-batched-bench -npl 1  : S_TG t/s      (decode, 1 sequence)
#   batched_tg_b16    llama-batched-bench -npl 16 : S_TG t/s      (aggregate decode, 16 seqs)
#   batched_pp_b16    llama-batched-bench -npl 16 : S_PP t/s      (16 prompts of NPP tokens)
#   batched_total_b16 llama-batched-bench -npl 16 : S t/s         (pp+tg tokens / total time)
# llama-batched-bench runs each config once per invocation, so it is invoked
# REPS times and the median is reported. Diagnostics go to stderr.
set -euo pipefail

PERF_TAG=peer_bench
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
[[ "${1:-}" == -h || "${1:-}" == --help ]] && { perf_help "$0"; exit 0; }
MODEL="${1:-$PERF_DEFAULT_MODEL}"
THREADS="${THREADS:-2}"
REPS="${REPS:-5}"
NPL="${BATCH_NPL:-16}"
NPP="${BATCH_NPP:-32}"
NTG="${BATCH_NTG:-64}"

[[ -f "$MODEL" ]] || { echo "model not found: $MODEL" >&2; exit 1; }
PEER_BIN="$(perf_peer_bin)"
BENCH="$PEER_BIN/llama-bench"
BBENCH="$PEER_BIN/llama-batched-bench"
[[ -x "$BENCH" && -x "$BBENCH" ]] || { echo "peer binaries missing in $PEER_BIN" >&2; exit 1; }
PEER_VERSION="$(perf_peer_version "$PEER_BIN")"
perf_init_tmp
TMP="$PERF_TMP"

# --- llama-bench: pp512 and tg128 -------------------------------------------
PP_CMD=("$BENCH" -m "$MODEL" -p 512 -n 0 -t "$THREADS" -r "$REPS" -o jsonl)
TG_CMD=("$BENCH" -m "$MODEL" -p 0 -n 128 -t "$THREADS" -r "$REPS" -o jsonl)
echo "+ ${PP_CMD[*]}" >&2
"${PP_CMD[@]}" > "$TMP/pp.jsonl" 2> "$TMP/pp.err" || { cat "$TMP/pp.err" >&2; exit 1; }
echo "+ ${TG_CMD[*]}" >&2
"${TG_CMD[@]}" > "$TMP/tg.jsonl" 2> "$TMP/tg.err" || { cat "$TMP/tg.err" >&2; exit 1; }

# --- llama-batched-bench: 1 and NPL sequences ----------------------------------
CTX=$(( NPL * (NPP + NTG) ))
(( CTX < 2048 )) && CTX=2048
BB_CMD=("$BBENCH" -m "$MODEL" -c "$CTX" -b 2048 -ub 512 -t "$THREADS" -tb "$THREADS"
        -npp "$NPP" -ntg "$NTG" -npl "1,$NPL" --output-format jsonl)
echo "+ ${BB_CMD[*]}   (x$REPS)" >&2
: > "$TMP/bb.jsonl"
for ((i = 0; i < REPS; i++)); do
  "${BB_CMD[@]}" > "$TMP/bb.out" 2> "$TMP/bb.err" || { cat "$TMP/bb.err" >&2; exit 1; }
  grep -h '^{' "$TMP/bb.out" "$TMP/bb.err" >> "$TMP/bb.jsonl" || true
done

PYTHONPATH="$PERF_SCRIPTS" python3 - "$TMP" "$PEER_VERSION" "$THREADS" "$REPS" "$NPL" "$NPP" "$NTG" "$MODEL" \
    "${PP_CMD[*]}" "${TG_CMD[*]}" "${BB_CMD[*]}" <<'PY'
import json, sys, os
from perflib import median, read_jsonl
tmp, ver, threads, reps, npl, npp, ntg, model, pp_cmd, tg_cmd, bb_cmd = sys.argv[1:]
threads, reps, npl, npp, ntg = map(int, (threads, reps, npl, npp, ntg))
base = {"engine": "llama.cpp", "version": ver, "threads": threads,
        "model": os.path.basename(model),
        # 1-min load average at the end of the run: figures taken on a busy
        # machine (load > cores) are not comparable
        "loadavg": round(os.getloadavg()[0], 2), "ncpu": os.cpu_count()}

def emit(metric, samples, cmd, **extra):
    if not samples:
        print(f"no samples for {metric}", file=sys.stderr); sys.exit(1)
    o = {**base, "metric": metric, "tok_s": round(median(samples), 2),
         "samples": [round(s, 2) for s in samples], **extra, "cmd": cmd}
    print(json.dumps(o), flush=True)

for name, path, cmd in (("pp512", "pp.jsonl", pp_cmd), ("tg128", "tg.jsonl", tg_cmd)):
    rows = read_jsonl(os.path.join(tmp, path))
    r = rows[0]
    emit(name, r["samples_ts"], cmd, n_prompt=r["n_prompt"], n_gen=r["n_gen"],
         build_commit=r.get("build_commit"), cpu=r.get("cpu_info"))

rows = read_jsonl(os.path.join(tmp, "bb.jsonl"))
def pick(pl, key):
    return [r[key] for r in rows if r["pl"] == pl]
emit("batched_tg_b1", pick(1, "speed_tg"), bb_cmd, pl=1, npp=npp, ntg=ntg)
emit(f"batched_tg_b{npl}", pick(npl, "speed_tg"), bb_cmd, pl=npl, npp=npp, ntg=ntg)
emit(f"batched_pp_b{npl}", pick(npl, "speed_pp"), bb_cmd, pl=npl, npp=npp, ntg=ntg)
emit(f"batched_total_b{npl}", pick(npl, "speed"), bb_cmd, pl=npl, npp=npp, ntg=ntg)
PY
