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
# ratios, and the targets (spate prefix TTFT ratio >= 5, chunked ITL p99
# ratio < 3, HTTP >= 0.95 x engine tok/s). Exit status 1 if any run failed.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
REPS=3
MODEL="$HOME/.cache/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf"
SCENARIO=all
THREADS=2
OUT=""
DO_SPATE=1
DO_PEER=1
BUILD_DIR="${BUILD_DIR:-$REPO/build-perf}"
PORT="${PORT:-18180}"
READY_TIMEOUT="${READY_TIMEOUT:-300}"
RUN_TIMEOUT="${RUN_TIMEOUT:-900}"
PEER_PARALLEL=16
PEER_CTX=$((PEER_PARALLEL * 2560))

while (($#)); do
  case "$1" in
    --reps) REPS="$2"; shift 2 ;;
    --model) MODEL="$2"; shift 2 ;;
    --scenario) SCENARIO="$2"; shift 2 ;;
    --spate-only) DO_PEER=0; shift ;;
    --peer-only) DO_SPATE=0; shift ;;
    --threads) THREADS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || { echo "--reps must be a positive integer" >&2; exit 2; }
[[ "$THREADS" =~ ^[1-9][0-9]*$ ]] || { echo "--threads must be a positive integer" >&2; exit 2; }
((DO_SPATE || DO_PEER)) || { echo "--spate-only and --peer-only exclude each other" >&2; exit 2; }
case "$SCENARIO" in
  all) SCENARIOS=(throughput prefix chunked) ;;
  throughput|prefix|chunked) SCENARIOS=("$SCENARIO") ;;
  *) echo "--scenario must be throughput, prefix, chunked or all" >&2; exit 2 ;;
esac
[[ -f "$MODEL" ]] || { echo "model not found: $MODEL" >&2; exit 1; }
MODEL_NAME="$(basename "$MODEL")"

log() { echo "[bench_serving] $*" >&2; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# --- 1. binaries --------------------------------------------------------------
SPATE_BIN="${SPATE_BIN:-$BUILD_DIR/spate}"
ENGINE_BENCH="${ENGINE_BENCH:-$BUILD_DIR/perf/engine_serving_bench}"
RUN_ENGINE=$((DO_SPATE && ${NO_ENGINE:-0} != 1))
if ((DO_SPATE)); then
  if [[ "${NO_BUILD:-0}" != 1 ]]; then
    if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
      log "configuring spate in $BUILD_DIR (Release, Ninja)"
      cmake -S "$REPO" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
    fi
    targets=(spate)
    if ((RUN_ENGINE)); then targets+=(engine_serving_bench); fi
    log "building ${targets[*]} in $BUILD_DIR"
    cmake --build "$BUILD_DIR" --target "${targets[@]}" >&2
  fi
  [[ -x "$SPATE_BIN" ]] || { log "spate binary missing: $SPATE_BIN"; exit 1; }
  if ((RUN_ENGINE)) && [[ ! -x "$ENGINE_BENCH" ]]; then log "engine bench missing: $ENGINE_BENCH"; exit 1; fi
fi
PEER_VERSION=""
if ((DO_PEER)); then
  [[ -n "${PEER_BIN:-}" ]] || PEER_BIN="$("$HERE/peer/build_llama_cpp.sh" | tail -n 1)"
  LLAMA_SERVER="$PEER_BIN/llama-server"
  [[ -x "$LLAMA_SERVER" ]] || { log "llama-server missing in $PEER_BIN"; exit 1; }
  PEER_VERSION="$(basename "$(dirname "$PEER_BIN")")"
fi

# --- 2. results file, logs, cleanup ---------------------------------------------
[[ -n "$OUT" ]] || OUT="$HOME/.cache/spate/bench/serving-$(date +%Y%m%d-%H%M%S).jsonl"
mkdir -p "$(dirname "$OUT")"
: > "$OUT"
LOGDIR="${OUT%.jsonl}.logs"
mkdir -p "$LOGDIR"
log "results file: $OUT (server logs in $LOGDIR)"
TMP="$(mktemp -d)"

SERVER_PID=""
SERVER_PORT="$PORT"
stop_server() {
  [[ -n "$SERVER_PID" ]] || return 0
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do  # up to 10 s for a graceful exit
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
  fi
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}
cleanup() { stop_server; rm -rf "$TMP"; }
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

http_code() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$SERVER_PORT$1" 2>/dev/null || true; }

# Prints the first port >= $PORT (up to +99) that binds on 127.0.0.1 without SO_REUSEADDR.
pick_port() {
  python3 - "$PORT" <<'PY'
import socket, sys
base = int(sys.argv[1])
for p in range(base, base + 100):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    print(p)
    sys.exit(0)
sys.exit(f"no free port in {base}..{base + 99}")
PY
}

# Appends one JSON object built from key=value pairs (values that parse as
# JSON stay JSON, others become strings) to the results file.
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

# start_server ENGINE SCENARIO REP: starts the server in the background and
# waits until it is ready. Returns 1 (after recording a failure) if it exits
# or does not become ready within READY_TIMEOUT.
SERVER_CMD=""
start_server() {
  local engine="$1" scenario="$2" rep="$3" ready_path cmd
  SERVER_PORT="$(pick_port)" || { log "no free port from $PORT; set PORT"; exit 1; }
  if [[ "$engine" == spate ]]; then
    cmd=("$SPATE_BIN" serve --model "$MODEL" --threads "$THREADS" --host 127.0.0.1 --port "$SERVER_PORT")
    [[ "$scenario" == chunked ]] && cmd+=(--enable-chunked-prefill)
    # shellcheck disable=SC2206
    cmd+=(${SPATE_ARGS:-})
    ready_path=/ready
  else
    cmd=("$LLAMA_SERVER" -m "$MODEL" -t "$THREADS" -tb "$THREADS" --parallel "$PEER_PARALLEL" -c "$PEER_CTX"
         --host 127.0.0.1 --port "$SERVER_PORT")
    # shellcheck disable=SC2206
    cmd+=(${PEER_ARGS:-})
    ready_path=/health
  fi
  SERVER_CMD="${cmd[*]}"
  SERVER_LOG="$LOGDIR/$engine-$scenario-rep$rep.log"
  "${cmd[@]}" > "$SERVER_LOG" 2>&1 &
  SERVER_PID=$!
  local t0=$SECONDS
  while [[ "$(http_code "$ready_path")" != 200 ]]; do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      log "$engine server exited during start-up: $SERVER_CMD"
      tail -n 20 "$SERVER_LOG" >&2
      wait "$SERVER_PID" 2>/dev/null || true
      SERVER_PID=""
      record kind=failure engine="$engine" scenario="$scenario" rep="$rep" what=start cmd="$SERVER_CMD"
      return 1
    fi
    if ((SECONDS - t0 > READY_TIMEOUT)); then
      log "$engine server not ready after ${READY_TIMEOUT}s: $SERVER_CMD"
      tail -n 20 "$SERVER_LOG" >&2
      stop_server
      record kind=failure engine="$engine" scenario="$scenario" rep="$rep" what=ready-timeout cmd="$SERVER_CMD"
      return 1
    fi
    sleep 0.2
  done
  log "   $engine ready in $((SECONDS - t0)) s"
}

# One client run against the running server; appends a sample or a failure.
run_http() {  # engine scenario rep
  local engine="$1" scenario="$2" rep="$3" label rc=0 before
  label=$([[ "$engine" == spate ]] && echo spate || echo llama.cpp)
  local cmd=(python3 "$HERE/serving_bench.py" --url "http://127.0.0.1:$SERVER_PORT" --scenario "$scenario"
             --rep "$((rep - 1))" --label "$label")
  before="$(loadavg)"
  timeout "$RUN_TIMEOUT" "${cmd[@]}" > "$TMP/out" 2> "$TMP/err" || rc=$?
  if ((rc != 0)) || ! grep -q '^{' "$TMP/out"; then
    log "FAILED (rc=$rc): ${cmd[*]}"
    tail -n 20 "$TMP/err" >&2
    record kind=failure engine="$label" transport=http scenario="$scenario" rep="$rep" rc="$rc" \
           cmd="${cmd[*]}" server_cmd="$SERVER_CMD" stderr="$(tail -c 2000 "$TMP/err")"
    return 0
  fi
  python3 - "$(grep -m1 '^{' "$TMP/out")" "$label" "$MODEL_NAME" "$rep" "$before" "$(loadavg)" \
      "${cmd[*]}" "$SERVER_CMD" "$PEER_VERSION" >> "$OUT" <<'PY'
import json, sys
line, engine, model, rep, before, after, cmd, server_cmd, ver = sys.argv[1:]
o = json.loads(line)
o.pop("label", None)
o.pop("rep", None)
s = {"kind": "sample", "engine": engine, "transport": "http", "model": model, "rep": int(rep), **o,
     "loadavg_before": before, "loadavg_after": after, "cmd": cmd, "server_cmd": server_cmd}
if engine != "spate":
    s["version"] = ver
print(json.dumps(s))
PY
  log "   $label http $scenario: $(python3 -c 'import json,sys; o=json.loads(sys.argv[1]); print({k: v for k, v in o.items() if k.endswith(("tok_s", "_ms", "ratio"))})' "$(grep -m1 '^{' "$TMP/out")")"
}

run_engine() {  # rep
  local rep="$1" rc=0 before
  local cmd=("$ENGINE_BENCH" --model "$MODEL" --threads "$THREADS" --prompts "$HERE/data/throughput.jsonl" --reps 1)
  cmd+=(${ENGINE_ARGS:-})
  before="$(loadavg)"
  timeout "$RUN_TIMEOUT" "${cmd[@]}" > "$TMP/out" 2> "$TMP/err" || rc=$?
  cp "$TMP/err" "$LOGDIR/engine-throughput-rep$rep.log"
  if ((rc != 0)) || ! grep -q '^{' "$TMP/out"; then
    log "FAILED (rc=$rc): ${cmd[*]}"
    tail -n 20 "$TMP/err" >&2
    record kind=failure engine=spate transport=engine scenario=throughput rep="$rep" rc="$rc" cmd="${cmd[*]}"
    return 0
  fi
  python3 - "$(grep -m1 '^{' "$TMP/out")" "$MODEL_NAME" "$rep" "$before" "$(loadavg)" "${cmd[*]}" >> "$OUT" <<'PY'
import json, sys
line, model, rep, before, after, cmd = sys.argv[1:]
o = json.loads(line)
for k in ("engine", "bench", "rep"):
    o.pop(k, None)
print(json.dumps({"kind": "sample", "engine": "spate", "transport": "engine", "model": model, "rep": int(rep), **o,
                  "loadavg_before": before, "loadavg_after": after, "cmd": cmd}))
PY
  log "   spate engine throughput: $(grep -m1 '^{' "$TMP/out" | python3 -c 'import json,sys; o=json.load(sys.stdin); print(o["gen_tok_s"], "tok/s")')"
}

# --- 3. measurements -------------------------------------------------------------
T0=$SECONDS
record kind=run start="$(date -Is)" host="$(hostname)" ncpu="$(nproc)" threads="$THREADS" reps="$REPS" \
       model="$MODEL_NAME" scenarios="${SCENARIOS[*]}" peer_version="$PEER_VERSION" spate_bin="$SPATE_BIN" \
       loadavg_before="$(loadavg)"
log "load average before: $(loadavg) ($(nproc) cpus); $REPS reps of ${SCENARIOS[*]} on $MODEL_NAME"
for ((r = 1; r <= REPS; r++)); do
  order=()
  if ((DO_SPATE)); then order+=(spate); fi
  if ((DO_PEER)); then
    if ((r % 2)); then order+=(peer); else order=(peer "${order[@]}"); fi
  fi
  for sc in "${SCENARIOS[@]}"; do
    for eng in "${order[@]}"; do
      # spate in-process next to spate over HTTP: after it on odd reps, before it on even ones.
      with_engine=0
      if [[ "$eng" == spate && "$sc" == throughput ]] && ((RUN_ENGINE)); then with_engine=1; fi
      if ((with_engine && r % 2 == 0)); then
        log "rep $r/$REPS, $sc, spate in-process (load $(loadavg))"
        run_engine "$r"
      fi
      log "rep $r/$REPS, $sc, $eng (load $(loadavg))"
      if start_server "$eng" "$sc" "$r"; then
        run_http "$eng" "$sc" "$r"
        stop_server
      fi
      if ((with_engine && r % 2 == 1)); then
        log "rep $r/$REPS, $sc, spate in-process (load $(loadavg))"
        run_engine "$r"
      fi
    done
  done
done
record kind=run end="$(date -Is)" seconds="$((SECONDS - T0))" loadavg_after="$(loadavg)"
log "load average after: $(loadavg) ($((SECONDS - T0)) s)"

# --- 4. medians, ratios, targets ---------------------------------------------------
python3 - "$OUT" <<'PY'
import json, statistics, sys
path = sys.argv[1]
recs = [json.loads(l) for l in open(path)]
run = {}
for r in recs:
    if r["kind"] == "run":
        run.update(r)
samples = [r for r in recs if r["kind"] == "sample"]
failures = [r for r in recs if r["kind"] == "failure"]
METRICS = {
    "throughput": ["gen_tok_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "e2e_p50_ms"],
    "prefix": ["ttft_turn1_ms", "ttft_turn2_ms", "ttft_ratio"],
    "chunked": ["itl_p99_alone_ms", "itl_p99_mixed_ms", "itl_p99_ratio", "itl_max_alone_ms", "itl_max_mixed_ms",
                "itl_max_ratio", "long_ttft_ms"],
}

def values(engine, transport, scenario, metric):
    return [s[metric] for s in samples if s["engine"] == engine and s["transport"] == transport
            and s["scenario"] == scenario and s.get(metric) is not None]

def med(v):
    return statistics.median(v) if v else None

def fmt(x):
    return "-" if x is None else (f"{x:.1f}" if abs(x) >= 100 else f"{x:.2f}")

def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b

summary = []
for sc, ms in METRICS.items():
    for m in ms:
        s, p = values("spate", "http", sc, m), values("llama.cpp", "http", sc, m)
        e = values("spate", "engine", sc, m)
        if not (s or p or e):
            continue
        o = {"kind": "median", "scenario": sc, "metric": m, "spate": med(s), "llama.cpp": med(p),
             "spate_over_peer": ratio(med(s), med(p)), "spate_engine": med(e),
             "http_over_engine": ratio(med(s), med(e)), "spate_samples": s, "llama_samples": p, "engine_samples": e}
        summary.append(o)
with open(path, "a") as f:
    for o in summary:
        f.write(json.dumps(o) + "\n")

print(f"\nserving: spate vs llama.cpp {run.get('peer_version') or '-'} on {run.get('model')}, "
      f"{run.get('threads')} threads, median of {run.get('reps')} reps; load average before "
      f"{run.get('loadavg_before')}, after {run.get('loadavg_after')} ({run.get('ncpu')} cpus)")
print("(tok/s and *_ratio: higher is better; *_ms: lower is better; 'engine' = spate in-process, no HTTP)")
hdr = (f"| {'scenario':<10} | {'metric':<16} | {'spate':>9} | {'llama.cpp':>9} | {'spate/llama':>11} | "
       f"{'spate engine':>12} | {'http/engine':>11} | {'spate min-max':>17} | {'llama min-max':>17} |")
print(hdr)
print("|" + "|".join("-" * len(c) for c in hdr.split("|")[1:-1]) + "|")
def spread(v):
    return f"{fmt(min(v))}-{fmt(max(v))}" if v else "-"
for o in summary:
    r1 = "-" if o["spate_over_peer"] is None else f"{o['spate_over_peer']:.2f}x"
    r2 = "-" if o["http_over_engine"] is None else f"{o['http_over_engine']:.2f}x"
    print(f"| {o['scenario']:<10} | {o['metric']:<16} | {fmt(o['spate']):>9} | {fmt(o['llama.cpp']):>9} | {r1:>11} | "
          f"{fmt(o['spate_engine']):>12} | {r2:>11} | {spread(o['spate_samples']):>17} | {spread(o['llama_samples']):>17} |")

get = {(o["scenario"], o["metric"]): o for o in summary}
print()
checks = [("prefix", "ttft_ratio", "spate", lambda x: x >= 5, "spate prefix TTFT turn1/turn2 >= 5"),
          ("chunked", "itl_p99_ratio", "spate", lambda x: x < 3, "spate chunked ITL p99 mixed/alone < 3"),
          ("throughput", "gen_tok_s", "http_over_engine", lambda x: x >= 0.95, "spate HTTP tok/s >= 0.95 x engine")]
for sc, m, key, ok, what in checks:
    o = get.get((sc, m))
    if o and o.get(key) is not None:
        print(f"target: {what}: {o[key]:.2f} -> {'MET' if ok(o[key]) else 'NOT MET'}")
for eng in ("spate", "llama.cpp"):
    chunked = [s for s in samples if s["scenario"] == "chunked" and s["engine"] == eng]
    if chunked:
        n_ov = sum(1 for s in chunked if s.get("long_overlapped"))
        print(f"chunked, {eng}: the long prompt's first token came before any stream ended in {n_ov}/{len(chunked)} runs")
ncpu = int(run.get("ncpu") or 1)
peak = max((float(s["loadavg_before"].split()[0]) for s in samples), default=0.0)
print(f"peak 1-min load average before a run: {peak:.2f}")
if peak > ncpu + 1:
    print(f"  WARNING: load average {peak:.2f} > {ncpu} cpus + 1: other work shared the machine, "
          f"figures are not comparable")
if failures:
    print(f"{len(failures)} run(s) FAILED: " + ", ".join(f"{f.get('engine')} {f.get('scenario')} rep {f.get('rep')}"
                                                        for f in failures))
PY
echo "results: $OUT"
if grep -q '"kind": "failure"' "$OUT"; then exit 1; fi
