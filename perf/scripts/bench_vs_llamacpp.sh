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
# Output: progress on stderr; a summary table on stdout (perf/scripts/summarize.py:
# ratios spate/llama.cpp and spate's bd16/tg128); every raw sample and the medians
# as JSON lines in the results file, whose path is printed at the start and the end.
set -euo pipefail
PERF_TAG=bench_vs_llamacpp
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REPS=5
THREADS=2
OUT=""
RUN_TIMEOUT="${RUN_TIMEOUT:-300}"

# Workload shape, identical for both engines.
PP=512
TG=128
BD_NPL=16
BD_NPP=32
BD_NTG=64

perf_parse_args "--model --reps --threads --out" "$@"
((${#PERF_POSITIONAL[@]} == 0)) || { echo "unexpected argument: ${PERF_POSITIONAL[0]} (see --help)" >&2; exit 2; }
perf_check_common

# --- 1. build both engines (each step is a no-op when up to date) ------------
PEER_BIN="$(perf_peer_bin)"
LLAMA_BENCH="$PEER_BIN/llama-bench"
LLAMA_BBENCH="$PEER_BIN/llama-batched-bench"
[[ -x "$LLAMA_BENCH" && -x "$LLAMA_BBENCH" ]] || { perf_log "peer binaries missing in $PEER_BIN"; exit 1; }
PEER_VERSION="$(perf_peer_version "$PEER_BIN")"
perf_build spate_bench
SPATE_BENCH="$BUILD_DIR/perf/spate_bench"
[[ -x "$SPATE_BENCH" ]] || { perf_log "spate_bench missing: $SPATE_BENCH"; exit 1; }

# --- 2. results file ------------------------------------------------------------
perf_results vs_llamacpp "$OUT"
perf_init_tmp

# Runs one engine command with a timeout; stdout -> $PERF_TMP/out, stderr -> $PERF_TMP/err.
# A run that times out is recorded ("kind":"timeout") and retried once (a guard
# against a hung engine). Any other failure (or a second timeout) prints the
# command and its stderr and exits.
run() {
  local rc attempt
  for attempt in 1 2; do
    rc=0
    perf_run_timeout "$RUN_TIMEOUT" "$@" > "$PERF_TMP/out" 2> "$PERF_TMP/err" || rc=$?
    ((rc == 0)) && return 0
    if ((rc == 124 && attempt == 1)); then
      perf_log "TIMEOUT after ${RUN_TIMEOUT}s (hang?), retrying once: $*"
      perf_record kind=timeout cmd="$*" seconds="$RUN_TIMEOUT" loadavg="$(perf_loadavg)"
      continue
    fi
    break
  done
  perf_log "FAILED (rc=$rc$( ((rc == 124)) && echo ", timed out after ${RUN_TIMEOUT}s")): $*"
  tail -n 30 "$PERF_TMP/err" >&2
  exit 1
}

# One spate sample: spate_bench prints {"engine":"spate","metric":...,"tok_s":...}.
spate_sample() {  # model round metric-args...
  local model="$1" round="$2"; shift 2
  local cmd=("$SPATE_BENCH" --model "$model" --threads "$THREADS" --reps 1 "$@")
  run "${cmd[@]}"
  perf_merge --from "$PERF_TMP/out" --first --drop min,max,reps kind=sample model="$(basename "$model")" \
    round="$round" loadavg="$(perf_loadavg)" cmd="${cmd[*]}"
}

# One llama.cpp sample. kind=bench: llama-bench (avg_ts of one repetition);
# kind=batched: llama-batched-bench (speed_tg of the -npl row); its JSON may go to either stream.
llama_sample() {  # model round metric kind cmd...
  local model="$1" round="$2" metric="$3" kind="$4" tok_s; shift 4
  run "$@"
  tok_s="$(python3 "$PERFLIB" peer-tok-s "$kind" "$metric" "$BD_NPL" "$PERF_TMP/out" "$PERF_TMP/err")" ||
    { perf_log "no $metric figure in the output of: $*"; exit 1; }
  perf_record kind=sample engine=llama.cpp version="$PEER_VERSION" metric="$metric" model="$(basename "$model")" \
    round="$round" tok_s="$tok_s" loadavg="$(perf_loadavg)" cmd="$*"
}

# --- 3. measurements ---------------------------------------------------------------
T0=$SECONDS
perf_record kind=run start="$(date -Is)" host="$(hostname)" ncpu="$(nproc)" threads="$THREADS" reps="$REPS" \
  pp="$PP" tg="$TG" bd_npl="$BD_NPL" peer_version="$PEER_VERSION" spate_bench="$SPATE_BENCH" \
  loadavg_before="$(perf_loadavg)"
perf_log "load average before: $(perf_loadavg)   ($(nproc) cpus)"

CTX=$(( BD_NPL * (BD_NPP + BD_NTG) ))
(( CTX < 2048 )) && CTX=2048
for model in "${MODELS[@]}"; do
  name="$(basename "$model")"
  load_before="$(perf_loadavg)"
  perf_log "== $name: $REPS rounds, $THREADS threads, load average $load_before"
  for ((r = 1; r <= REPS; r++)); do
    perf_log "   round $r/$REPS: pp$PP"
    spate_sample "$model" "$r" --only pp --pp "$PP"
    llama_sample "$model" "$r" "pp$PP" bench \
      "$LLAMA_BENCH" -m "$model" -p "$PP" -n 0 -t "$THREADS" -r 1 -o jsonl
    perf_log "   round $r/$REPS: tg$TG"
    spate_sample "$model" "$r" --only tg --tg "$TG"
    llama_sample "$model" "$r" "tg$TG" bench \
      "$LLAMA_BENCH" -m "$model" -p 0 -n "$TG" -t "$THREADS" -r 1 -o jsonl
    perf_log "   round $r/$REPS: bd$BD_NPL"
    spate_sample "$model" "$r" --only bd --batch "$BD_NPL" --bd-prompt "$BD_NPP" --bd-gen "$BD_NTG"
    llama_sample "$model" "$r" "bd$BD_NPL" batched \
      "$LLAMA_BBENCH" -m "$model" -c "$CTX" -b 2048 -ub 512 -t "$THREADS" -tb "$THREADS" \
      -npp "$BD_NPP" -ntg "$BD_NTG" -npl "$BD_NPL" --output-format jsonl
  done
  perf_record kind=model model="$name" path="$model" loadavg_before="$load_before" loadavg_after="$(perf_loadavg)"
  perf_log "   $name done, load average $(perf_loadavg)"
done
perf_finish vs_llamacpp "$T0"
