#!/usr/bin/env bash
# Constrained-decoding benchmark: `spate serve` vs llama.cpp's llama-server on
# the same model and threads, 16 concurrent streaming chat completions per
# schema set, constrained (response_format json_schema, strict) and
# unconstrained (same prompts, same per-request token counts), via
# perf/scripts/bench_structured.py.
#
# Usage: perf/scripts/bench_structured.sh [--reps N] [--model PATH] [--sets flat,nested] [--rounds R]
#                                 [--spate-only | --peer-only] [--threads T] [--out FILE]
#   --reps N        repetitions (default 3); figures are medians over them
#   --model PATH    GGUF model (default ~/.cache/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf)
#   --sets LIST     schema sets of bench_structured.py (default flat,nested)
#   --rounds R      requests per client per set and mode (default 2)
#   --spate-only    only spate; --peer-only: only llama-server
#   --threads T     threads of both servers (default 2)
#   --out FILE      results, JSON lines (default ~/.cache/spate/bench/structured-<date>-<time>.jsonl);
#                   server logs go to FILE without .jsonl + .logs/
# Env:
#   BUILD_DIR       spate build dir (default <repo>/build-perf; configured Release/Ninja if missing)
#   NO_BUILD=1      do not build spate
#   SPATE_BIN       spate binary (default $BUILD_DIR/spate)
#   PEER_BIN        llama.cpp bin dir (default: output of perf/peer/build_llama_cpp.sh)
#   PORT            first server port to try (default 18280)
#   SPATE_ARGS      extra arguments for `spate serve` (word-split)
#   PEER_ARGS       extra arguments for llama-server (word-split)
#   READY_TIMEOUT   seconds to wait for a server to become ready (default 300)
#   RUN_TIMEOUT     seconds allowed for one client run, all sets and modes (default 1800)
#
# Servers (one at a time, a fresh one per rep):
#   spate : spate serve --model M --threads T --host 127.0.0.1 --port P; ready when GET /ready is 200
#   peer  : llama-server -m M -t T -tb T --parallel 16 -c 40960 --host 127.0.0.1 --port P
#           (16 slots x 2560 tokens); ready when GET /health is 200
# The requests are identical for both (OpenAI's response_format; llama-server
# 0.3.16 turns response_format.json_schema.schema into a grammar).
#
# Odd reps run spate first, even reps llama-server first. Every client run
# writes one "kind":"sample" line per (set, mode) with the load average before
# and after; a failed mode is a "kind":"failure" line and the rest goes on. At
# the end: a table of medians (perf/scripts/summarize.py) with the ratios constrained/unconstrained (per
# engine) and spate/llama (constrained). Exit status 1 if anything failed.
set -euo pipefail
PERF_TAG=bench_structured
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REPS=3 THREADS=2 OUT="" SETS=flat,nested ROUNDS=2 PORT="${PORT:-18280}" RUN_TIMEOUT="${RUN_TIMEOUT:-1800}"

while (($#)); do
  case "$1" in
    --sets) SETS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    *) perf_common_option "$@"; shift "$PERF_SHIFT" ;;
  esac
done
perf_check_common
perf_positive_int --rounds "$ROUNDS"

# --- 1. binaries --------------------------------------------------------------
perf_side_by_side_binaries spate

# --- 2. results file, logs, cleanup ---------------------------------------------
perf_results structured "$OUT"
perf_init_tmp

start_server() {  # engine rep; returns 1 (after recording a failure) when it does not come up
  perf_start_engine "$1" "$PERF_LOGDIR/$1-rep$2.log" && return 0
  perf_record kind=failure engine="$1" rep="$2" what=start cmd="$PERF_SERVER_CMD"
  return 1
}

run_client() {  # engine rep
  local engine="$1" rep="$2" label rc=0 before
  label="$(perf_engine_label "$engine")"
  local cmd=(python3 "$PERF_SCRIPTS/bench_structured.py" --url "$SERVER_URL" --sets "$SETS"
             --rounds "$ROUNDS" --label "$label")
  before="$(perf_loadavg)"
  perf_run_timeout "$RUN_TIMEOUT" "${cmd[@]}" > "$PERF_TMP/out" 2> "$PERF_TMP/err" || rc=$?
  if ! grep -q '^{' "$PERF_TMP/out"; then
    perf_client_failed "$rc" "${cmd[@]}"
    perf_record kind=failure engine="$label" rep="$rep" rc="$rc" cmd="${cmd[*]}" stderr="$(tail -c 2000 "$PERF_TMP/err")"
    return 0
  fi
  # One line per (set, mode); a line with "error" is a failure.
  # shellcheck disable=SC2046
  perf_merge --from "$PERF_TMP/out" --drop label --failure-if-error kind=sample engine="$label" model="$MODEL_NAME" \
    rep="$rep" loadavg_before="$before" loadavg_after="$(perf_loadavg)" cmd="${cmd[*]}" \
    server_cmd="$PERF_SERVER_CMD" $(perf_version_field "$engine")
  while read -r line; do perf_log "   $label: $line"; done < <(grep '^{' "$PERF_TMP/out")
}

# --- 3. measurements -------------------------------------------------------------
T0=$SECONDS
perf_record kind=run start="$(date -Is)" host="$(hostname)" ncpu="$(nproc)" threads="$THREADS" reps="$REPS" \
  rounds="$ROUNDS" sets="$SETS" model="$MODEL_NAME" peer_version="$PEER_VERSION" spate_bin="${SPATE_BIN:-}" \
  loadavg_before="$(perf_loadavg)"
perf_log "load average before: $(perf_loadavg) ($(nproc) cpus); $REPS reps of sets $SETS on $MODEL_NAME"
for ((r = 1; r <= REPS; r++)); do
  perf_engine_order "$r"
  for eng in "${PERF_ORDER[@]}"; do
    perf_log "rep $r/$REPS, $eng (load $(perf_loadavg))"
    if start_server "$eng" "$r"; then
      run_client "$eng" "$r"
      perf_server_stop || true
    fi
  done
done
perf_finish structured "$T0"
