#!/usr/bin/env bash
# Side-by-side benchmark: spate (perf/bench/spate_bench.cpp) vs llama.cpp (the peer,
# perf/peer/build_llama_cpp.sh) on the same GGUF file and the same threads.
#
# Usage: perf/scripts/bench_vs_llamacpp.sh [--model PATH]... [--reps N] [--threads T] [--out FILE]
#   --model PATH  GGUF model; repeat for several (default
#                 ~/.cache/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf)
#   --reps N      rounds per model (default 5); figures are medians over them
#   --threads T   threads for both engines (default 2)
#   --out FILE    raw results, JSON lines (default
#                 ~/.cache/spate/bench/vs_llamacpp-<date>-<time>.jsonl)
# Env:
#   BUILD_DIR     spate build dir (default <repo>/build-perf; configured as
#                 Release with Ninja if missing)
#   NO_BUILD=1    do not (re)build spate_bench, use $BUILD_DIR/perf/spate_bench as is
#   PEER_BIN      llama.cpp bin dir (default: output of build_llama_cpp.sh,
#                 which builds the peer if needed)
#   RUN_TIMEOUT   seconds allowed for one engine invocation (default 300); a
#                 timed-out invocation is recorded and retried once
#
# Metrics (tok/s, higher is better):
#   pp512  prompt processing, 512 tokens in one forward pass
#            spate : spate_bench --only pp --pp 512
#            llama : llama-bench -p 512 -n 0            (avg_ts)
#   tg128  single-sequence decode of 128 tokens from an empty cache
#            spate : spate_bench --only tg --tg 128
#            llama : llama-bench -p 0 -n 128            (avg_ts)
#   bd16   16 sequences decoding together, aggregate tokens/s of the decode
#          phase (32 prompt tokens each, then 64 generated each)
#            spate : spate_bench --only bd --batch 16 --bd-prompt 32 --bd-gen 64
#            llama : llama-batched-bench -npp 32 -ntg 64 -npl 16   (S_TG = speed_tg)
# Both engines warm up inside each invocation (spate_bench: one untimed run;
# llama-bench: its warmup run; llama-batched-bench: its 16-token warmup decode).
#
# Noise: the machine is shared, so each model is measured in N rounds, each
# round running the six measurements interleaved
#   spate pp, llama pp, spate tg, llama tg, spate bd, llama bd
# with one timed sample each; both engines thus see the same noise, and the
# reported figure is the median of the N samples. The 1/5/15-min load average
# is recorded before and after each model (and with every sample).
#
# Output: progress on stderr; a summary table on stdout (ratios spate/llama.cpp
# and spate's bd16/tg128); every raw sample and the medians as JSON lines in
# the results file, whose path is printed at the start and the end.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
MODELS=()
REPS=5
THREADS=2
OUT=""
BUILD_DIR="${BUILD_DIR:-$REPO/build-perf}"
RUN_TIMEOUT="${RUN_TIMEOUT:-300}"

# Workload shape, identical for both engines.
PP=512
TG=128
BD_NPL=16
BD_NPP=32
BD_NTG=64

while (($#)); do
  case "$1" in
    --model) MODELS+=("$2"); shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
((${#MODELS[@]})) || MODELS=("$HOME/.cache/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf")
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || { echo "--reps must be a positive integer" >&2; exit 2; }
[[ "$THREADS" =~ ^[1-9][0-9]*$ ]] || { echo "--threads must be a positive integer" >&2; exit 2; }
for m in "${MODELS[@]}"; do
  [[ -f "$m" ]] || { echo "model not found: $m" >&2; exit 1; }
done

log() { echo "[bench_vs_llamacpp] $*" >&2; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# --- 1. build both engines (each step is a no-op when up to date) ------------
if [[ -z "${PEER_BIN:-}" ]]; then
  PEER_BIN="$("$HERE/peer/build_llama_cpp.sh" | tail -n 1)"
fi
LLAMA_BENCH="$PEER_BIN/llama-bench"
LLAMA_BBENCH="$PEER_BIN/llama-batched-bench"
[[ -x "$LLAMA_BENCH" && -x "$LLAMA_BBENCH" ]] || { log "peer binaries missing in $PEER_BIN"; exit 1; }
PEER_VERSION="$(basename "$(dirname "$PEER_BIN")")"

SPATE_BENCH="$BUILD_DIR/perf/spate_bench"
if [[ "${NO_BUILD:-0}" != 1 ]]; then
  if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
    log "configuring spate in $BUILD_DIR (Release, Ninja)"
    cmake -S "$REPO" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
  fi
  log "building spate_bench in $BUILD_DIR"
  cmake --build "$BUILD_DIR" --target spate_bench >&2
fi
[[ -x "$SPATE_BENCH" ]] || { log "spate_bench missing: $SPATE_BENCH"; exit 1; }

# --- 2. results file ------------------------------------------------------------
if [[ -z "$OUT" ]]; then
  OUT="$HOME/.cache/spate/bench/vs_llamacpp-$(date +%Y%m%d-%H%M%S).jsonl"
fi
mkdir -p "$(dirname "$OUT")"
: > "$OUT"
log "results file: $OUT"

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# Appends one JSON object (built by python from key=value pairs; values that
# parse as JSON stay JSON, others become strings) to the results file.
record() {
  python3 - "$@" >> "$OUT" <<'PY'
import json, sys
o = {}
for kv in sys.argv[1:]:
    k, v = kv.split("=", 1)
    try:
        o[k] = json.loads(v)
    except ValueError:
        o[k] = v
print(json.dumps(o))
PY
}

# Runs one engine command with a timeout; stdout -> $TMP/out, stderr -> $TMP/err.
# A run that times out is recorded ("kind":"timeout") and retried once: spate's
# thread pool can deadlock at startup (a worker that starts after the first
# parallel_for misses it), which shows up as a hang, not as a slow figure.
# Any other failure (or a second timeout) prints the command and its stderr
# and exits.
run() {
  local rc attempt
  for attempt in 1 2; do
    rc=0
    timeout "$RUN_TIMEOUT" "$@" > "$TMP/out" 2> "$TMP/err" || rc=$?
    ((rc == 0)) && return 0
    if ((rc == 124 && attempt == 1)); then
      log "TIMEOUT after ${RUN_TIMEOUT}s (hang?), retrying once: $*"
      record kind=timeout cmd="$*" seconds="$RUN_TIMEOUT" loadavg="$(loadavg)"
      continue
    fi
    break
  done
  log "FAILED (rc=$rc$( ((rc == 124)) && echo ", timed out after ${RUN_TIMEOUT}s")): $*"
  tail -n 30 "$TMP/err" >&2
  exit 1
}

# One spate sample: spate_bench prints {"engine":"spate","metric":...,"tok_s":...}.
spate_sample() {  # model round metric-args...
  local model="$1" round="$2"; shift 2
  local cmd=("$SPATE_BENCH" --model "$model" --threads "$THREADS" --reps 1 "$@")
  run "${cmd[@]}"
  local line
  line="$(grep -m1 '^{"engine":"spate"' "$TMP/out")" || { log "no JSON from: ${cmd[*]}"; cat "$TMP/err" >&2; exit 1; }
  python3 - "$line" "$model" "$round" "$(loadavg)" "${cmd[*]}" >> "$OUT" <<'PY'
import json, os, sys
line, model, rnd, load, cmd = sys.argv[1:]
o = json.loads(line)
print(json.dumps({"kind": "sample", "engine": "spate", "metric": o["metric"],
                  "model": os.path.basename(model), "round": int(rnd),
                  "tok_s": o["tok_s"], "threads": o["threads"],
                  "loadavg": load, "cmd": cmd}))
PY
}

# One llama.cpp sample. kind=bench: llama-bench jsonl (avg_ts of one repetition);
# kind=batched: llama-batched-bench jsonl (speed_tg of the -npl row).
llama_sample() {  # model round metric kind cmd...
  local model="$1" round="$2" metric="$3" kind="$4"; shift 4
  run "$@"
  python3 - "$TMP/out" "$TMP/err" "$kind" "$metric" "$model" "$round" "$(loadavg)" "$PEER_VERSION" "$BD_NPL" "$*" >> "$OUT" <<'PY'
import json, os, sys
out, err, kind, metric, model, rnd, load, ver, npl, cmd = sys.argv[1:]
rows = []
for path in (out, err):  # batched-bench's jsonl may go to either stream
    with open(path, errors="replace") as f:
        for l in f:
            l = l.strip()
            if l.startswith("{"):
                try:
                    rows.append(json.loads(l))
                except ValueError:
                    pass
if kind == "bench":
    rows = [r for r in rows if "avg_ts" in r]
    tok_s = rows[0]["avg_ts"] if rows else None
else:
    rows = [r for r in rows if r.get("pl") == int(npl) and "speed_tg" in r]
    tok_s = rows[0]["speed_tg"] if rows else None
if tok_s is None:
    sys.exit(f"no {metric} figure in the output of: {cmd}")
print(json.dumps({"kind": "sample", "engine": "llama.cpp", "version": ver, "metric": metric,
                  "model": os.path.basename(model), "round": int(rnd),
                  "tok_s": round(tok_s, 2), "loadavg": load, "cmd": cmd}))
PY
}

# --- 3. measurements ---------------------------------------------------------------
T0=$(date +%s)
record kind=run start="$(date -Is)" host="$(hostname)" ncpu="$(nproc)" threads="$THREADS" reps="$REPS" \
       peer_version="$PEER_VERSION" spate_bench="$SPATE_BENCH" loadavg_before="$(loadavg)"
log "load average before: $(loadavg)   ($(nproc) cpus)"

CTX=$(( BD_NPL * (BD_NPP + BD_NTG) ))
(( CTX < 2048 )) && CTX=2048
for model in "${MODELS[@]}"; do
  name="$(basename "$model")"
  load_before="$(loadavg)"
  log "== $name: $REPS rounds, $THREADS threads, load average $load_before"
  for ((r = 1; r <= REPS; r++)); do
    log "   round $r/$REPS: pp$PP"
    spate_sample "$model" "$r" --only pp --pp "$PP"
    llama_sample "$model" "$r" "pp$PP" bench \
      "$LLAMA_BENCH" -m "$model" -p "$PP" -n 0 -t "$THREADS" -r 1 -o jsonl
    log "   round $r/$REPS: tg$TG"
    spate_sample "$model" "$r" --only tg --tg "$TG"
    llama_sample "$model" "$r" "tg$TG" bench \
      "$LLAMA_BENCH" -m "$model" -p 0 -n "$TG" -t "$THREADS" -r 1 -o jsonl
    log "   round $r/$REPS: bd$BD_NPL"
    spate_sample "$model" "$r" --only bd --batch "$BD_NPL" --bd-prompt "$BD_NPP" --bd-gen "$BD_NTG"
    llama_sample "$model" "$r" "bd$BD_NPL" batched \
      "$LLAMA_BBENCH" -m "$model" -c "$CTX" -b 2048 -ub 512 -t "$THREADS" -tb "$THREADS" \
      -npp "$BD_NPP" -ntg "$BD_NTG" -npl "$BD_NPL" --output-format jsonl
  done
  record kind=model model="$name" path="$model" loadavg_before="$load_before" loadavg_after="$(loadavg)"
  log "   $name done, load average $(loadavg)"
done
record kind=run end="$(date -Is)" seconds="$(( $(date +%s) - T0 ))" loadavg_after="$(loadavg)"
log "load average after: $(loadavg)   ($(( $(date +%s) - T0 )) s)"

# --- 4. medians, ratios, summary table --------------------------------------------
python3 - "$OUT" "$PP" "$TG" "$BD_NPL" <<'PY'
import json, statistics, sys
path, pp, tg, npl = sys.argv[1], *sys.argv[2:]
metrics = [f"pp{pp}", f"tg{tg}", f"bd{npl}"]
recs = [json.loads(l) for l in open(path)]
samples, models, run = {}, {}, {}
for r in recs:
    if r["kind"] == "sample":
        samples.setdefault((r["model"], r["engine"], r["metric"]), []).append(r["tok_s"])
    elif r["kind"] == "model":
        models[r["model"]] = r
    elif r["kind"] == "run":
        run.update(r)

med = {k: statistics.median(v) for k, v in samples.items()}
summary = []
for model in models:
    for m in metrics:
        s, l = med.get((model, "spate", m)), med.get((model, "llama.cpp", m))
        summary.append({"kind": "median", "model": model, "metric": m,
                        "spate": round(s, 2), "llama.cpp": round(l, 2),
                        "ratio": round(s / l, 3),
                        "spate_samples": samples[(model, "spate", m)],
                        "llama_samples": samples[(model, "llama.cpp", m)]})
    bd, t = med[(model, "spate", f"bd{npl}")], med[(model, "spate", f"tg{tg}")]
    lbd, lt = med[(model, "llama.cpp", f"bd{npl}")], med[(model, "llama.cpp", f"tg{tg}")]
    summary.append({"kind": "batch_gain", "model": model,
                    "spate_bd_over_tg": round(bd / t, 2), "llama_bd_over_tg": round(lbd / lt, 2)})
with open(path, "a") as f:
    for o in summary:
        f.write(json.dumps(o) + "\n")

def spread(v):
    return f"{min(v):.1f}-{max(v):.1f}"

print(f"\nspate vs llama.cpp {run.get('peer_version', '?')}, {run.get('threads')} threads, "
      f"median of {run.get('reps')} interleaved rounds; load average before {run.get('loadavg_before')}, "
      f"after {run.get('loadavg_after')} ({run.get('ncpu')} cpus)")
hdr = f"| {'model':<36} | {'metric':<6} | {'spate tok/s':>11} | {'llama.cpp tok/s':>15} | {'spate/llama':>11} | {'spate min-max':>15} | {'llama min-max':>15} |"
print(hdr)
print("|" + "|".join("-" * (len(c)) for c in hdr.split("|")[1:-1]) + "|")
for o in summary:
    if o["kind"] == "median":
        print(f"| {o['model']:<36} | {o['metric']:<6} | {o['spate']:>11.1f} | {o['llama.cpp']:>15.1f} | "
              f"{o['ratio']:>10.2f}x | {spread(o['spate_samples']):>15} | {spread(o['llama_samples']):>15} |")
print()
for o in summary:
    if o["kind"] == "batch_gain":
        print(f"{o['model']}: bd{npl}/tg{tg} spate {o['spate_bd_over_tg']:.2f}x, "
              f"llama.cpp {o['llama_bd_over_tg']:.2f}x")
# The benchmark itself keeps ~threads cores busy, so a 1-min load average up to
# about ncpu is expected; clearly above it, other work shared the cores.
ncpu = int(run.get("ncpu") or 1)
for model, r in models.items():
    peak = max(float(x["loadavg"].split()[0]) for x in recs
               if x["kind"] == "sample" and x["model"] == model)
    print(f"{model}: load average before {r['loadavg_before']}, after {r['loadavg_after']}, "
          f"peak 1-min during samples {peak:.2f}")
    if peak > ncpu + 1:
        print(f"  WARNING: load average {peak:.2f} > {ncpu} cpus + 1 during {model}: "
              f"other work shared the machine, these figures are not comparable")
PY
echo "results: $OUT"
