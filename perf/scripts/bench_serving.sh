#!/usr/bin/env bash
# Serving benchmark: `spate serve` vs llama.cpp's llama-server over HTTP
# (perf/scripts/serving_bench.py), plus spate's engine in-process without HTTP
# (perf/bench/engine_serving_bench.cpp) for the HTTP/engine ratio.
#
# Usage: perf/scripts/bench_serving.sh [--reps N] [--model PATH] [--scenario S] [--spate-only | --peer-only]
#                              [--threads T] [--out FILE]
#   --reps N        repetitions (default 3); figures are medians over them
#   --model PATH    GGUF model (default ~/.cache/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf)
#   --scenario S    throughput | prefix | chunked | all (default all)
#   --spate-only    only spate (HTTP and in-process); --peer-only: only llama-server
#   --threads T     threads of both servers and the engine bench (default 2)
#   --out FILE      results, JSON lines (default ~/.cache/spate/bench/serving-<date>-<time>.jsonl);
#                   server logs go to FILE without .jsonl + .logs/
# Env:
#   BUILD_DIR       spate build dir (default <repo>/build-perf; configured Release/Ninja if missing)
#   NO_BUILD=1      do not build spate / engine_serving_bench
#   SPATE_BIN       spate binary (default $BUILD_DIR/spate)
#   ENGINE_BENCH    in-process bench (default $BUILD_DIR/perf/engine_serving_bench)
#   NO_ENGINE=1     skip the in-process engine bench
#   PEER_BIN        llama.cpp bin dir (default: output of perf/peer/build_llama_cpp.sh)
#   PORT            first server port to try (default 18180); each server start
#                   takes the first port from there that binds without
#                   SO_REUSEADDR (a stopped server's TIME_WAIT sockets block
#                   its port for a minute for servers that do not set it)
#   SPATE_ARGS      extra arguments for `spate serve` (word-split)
#   ENGINE_ARGS     extra arguments for engine_serving_bench (word-split; it takes
#                   the engine flags of `spate serve`, so pass the same engine
#                   flags as SPATE_ARGS for a like-for-like http/engine ratio)
#   PEER_ARGS       extra arguments for llama-server (word-split)
#   READY_TIMEOUT   seconds to wait for a server to become ready (default 300)
#   RUN_TIMEOUT     seconds allowed for one scenario run (default 900)
#
# Servers (one at a time, never both; a fresh server for every scenario and
# rep, so each starts with an empty prefix cache):
#   spate : spate serve --model M --threads T --host 127.0.0.1 --port P
#           [--enable-chunked-prefill for the chunked scenario]; ready when GET /ready is 200
#   peer  : llama-server -m M -t T -tb T --parallel 16 -c 40960 --host 127.0.0.1 --port P
#           (16 slots x 2560 tokens; continuous batching and prompt cache at their
#           defaults); ready when GET /health is 200
# Scenarios and metrics: see perf/scripts/serving_bench.py (and perf/README.md).
#
# Each rep runs, per scenario, spate over HTTP, spate in-process (throughput
# only) and llama-server, in alternating order (odd reps spate first, even
# reps peer first; odd reps HTTP before in-process, even reps after) so all
# see the same machine noise. Every run is one JSON
# line ("kind":"sample") with the load average before and after; a failed run
# is recorded ("kind":"failure", with the log tail on stderr) and the rest
# goes on. At the end: a table of medians with spate/peer and HTTP/engine
# ratios (perf/scripts/summarize.py), and the targets (spate prefix TTFT ratio >= 5, chunked ITL p99
# ratio < 3, HTTP >= 0.95 x engine tok/s). Exit status 1 if any run failed.
set -euo pipefail
PERF_TAG=bench_serving
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REPS=3 THREADS=2 OUT="" SCENARIO=all PORT="${PORT:-18180}" RUN_TIMEOUT="${RUN_TIMEOUT:-900}"

while (($#)); do
  case "$1" in
    --scenario) SCENARIO="$2"; shift 2 ;;
    *) perf_common_option "$@"; shift "$PERF_SHIFT" ;;
  esac
done
perf_check_common
case "$SCENARIO" in
  all) SCENARIOS=(throughput prefix chunked) ;;
  throughput|prefix|chunked) SCENARIOS=("$SCENARIO") ;;
  *) echo "--scenario must be throughput, prefix, chunked or all" >&2; exit 2 ;;
esac

# --- 1. binaries --------------------------------------------------------------
RUN_ENGINE=$((DO_SPATE && ${NO_ENGINE:-0} != 1))
targets=(spate)
if ((RUN_ENGINE)); then targets+=(engine_serving_bench); fi
perf_side_by_side_binaries "${targets[@]}"
if ((RUN_ENGINE)); then
  ENGINE_BENCH="${ENGINE_BENCH:-$BUILD_DIR/perf/engine_serving_bench}"
  [[ -x "$ENGINE_BENCH" ]] || { perf_log "engine bench missing: $ENGINE_BENCH"; exit 1; }
fi

# --- 2. results file, logs, cleanup ---------------------------------------------
perf_results serving "$OUT"
perf_init_tmp

# start_server ENGINE SCENARIO REP: a fresh server, ready; returns 1 (after recording a
# failure) when it does not come up.
start_server() {
  local engine="$1" scenario="$2" rep="$3" extra=()
  [[ "$engine" == spate && "$scenario" == chunked ]] && extra=(--enable-chunked-prefill)
  perf_start_engine "$engine" "$PERF_LOGDIR/$engine-$scenario-rep$rep.log" "${extra[@]}" && return 0
  perf_record kind=failure engine="$engine" scenario="$scenario" rep="$rep" what=start cmd="$PERF_SERVER_CMD"
  return 1
}

# One client run against the running server; appends a sample or a failure.
run_http() {  # engine scenario rep
  local engine="$1" scenario="$2" rep="$3" label rc=0 before
  label="$(perf_engine_label "$engine")"
  before="$(perf_loadavg)"
  perf_serving_client "$scenario" "$rep" "$label" "$RUN_TIMEOUT" || rc=$?
  if ((rc != 0)); then
    perf_record kind=failure engine="$label" transport=http scenario="$scenario" rep="$rep" rc="$rc" \
      cmd="${PERF_CLIENT_CMD[*]}" server_cmd="$PERF_SERVER_CMD" stderr="$(tail -c 2000 "$PERF_TMP/err")"
    return 0
  fi
  # shellcheck disable=SC2046
  perf_merge --from "$PERF_TMP/out" --first --drop label,rep kind=sample engine="$label" transport=http \
    model="$MODEL_NAME" rep="$rep" loadavg_before="$before" loadavg_after="$(perf_loadavg)" \
    cmd="${PERF_CLIENT_CMD[*]}" server_cmd="$PERF_SERVER_CMD" $(perf_version_field "$engine")
  perf_log "   $label http $scenario: $(grep -m1 '^{' "$PERF_TMP/out")"
}

run_engine() {  # rep
  local rep="$1" rc=0 before
  local cmd=("$ENGINE_BENCH" --model "$MODEL" --threads "$THREADS" --prompts "$PERF_DIR/data/throughput.jsonl" --reps 1)
  # shellcheck disable=SC2206
  cmd+=(${ENGINE_ARGS:-})
  before="$(perf_loadavg)"
  perf_run_timeout "$RUN_TIMEOUT" "${cmd[@]}" > "$PERF_TMP/out" 2> "$PERF_TMP/err" || rc=$?
  cp "$PERF_TMP/err" "$PERF_LOGDIR/engine-throughput-rep$rep.log"
  if ((rc != 0)) || ! grep -q '^{' "$PERF_TMP/out"; then
    perf_client_failed "$rc" "${cmd[@]}"
    perf_record kind=failure engine=spate transport=engine scenario=throughput rep="$rep" rc="$rc" cmd="${cmd[*]}"
    return 0
  fi
  perf_merge --from "$PERF_TMP/out" --first --drop engine,bench,rep kind=sample engine=spate transport=engine \
    model="$MODEL_NAME" rep="$rep" loadavg_before="$before" loadavg_after="$(perf_loadavg)" cmd="${cmd[*]}"
  perf_log "   spate engine throughput: $(grep -m1 '^{' "$PERF_TMP/out")"
}

# --- 3. measurements -------------------------------------------------------------
T0=$SECONDS
perf_record kind=run start="$(date -Is)" host="$(hostname)" ncpu="$(nproc)" threads="$THREADS" reps="$REPS" \
  model="$MODEL_NAME" scenarios="${SCENARIOS[*]}" peer_version="$PEER_VERSION" spate_bin="${SPATE_BIN:-}" \
  loadavg_before="$(perf_loadavg)"
perf_log "load average before: $(perf_loadavg) ($(nproc) cpus); $REPS reps of ${SCENARIOS[*]} on $MODEL_NAME"
for ((r = 1; r <= REPS; r++)); do
  perf_engine_order "$r"
  for sc in "${SCENARIOS[@]}"; do
    for eng in "${PERF_ORDER[@]}"; do
      # spate in-process next to spate over HTTP: after it on odd reps, before it on even ones.
      with_engine=0
      if [[ "$eng" == spate && "$sc" == throughput ]] && ((RUN_ENGINE)); then with_engine=1; fi
      if ((with_engine && r % 2 == 0)); then
        perf_log "rep $r/$REPS, $sc, spate in-process (load $(perf_loadavg))"
        run_engine "$r"
      fi
      perf_log "rep $r/$REPS, $sc, $eng (load $(perf_loadavg))"
      if start_server "$eng" "$sc" "$r"; then
        run_http "$eng" "$sc" "$r"
        perf_server_stop || true
      fi
      if ((with_engine && r % 2 == 1)); then
        perf_log "rep $r/$REPS, $sc, spate in-process (load $(perf_loadavg))"
        run_engine "$r"
      fi
    done
  done
done
perf_finish serving "$T0"
