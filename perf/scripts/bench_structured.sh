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
# the end: a table of medians with the ratios constrained/unconstrained (per
# engine) and spate/llama (constrained). Exit status 1 if anything failed.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
REPS=3
MODEL="$HOME/.cache/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf"
SETS=flat,nested
ROUNDS=2
THREADS=2
OUT=""
DO_SPATE=1
DO_PEER=1
BUILD_DIR="${BUILD_DIR:-$REPO/build-perf}"
PORT="${PORT:-18280}"
READY_TIMEOUT="${READY_TIMEOUT:-300}"
RUN_TIMEOUT="${RUN_TIMEOUT:-1800}"
PEER_PARALLEL=16
PEER_CTX=$((PEER_PARALLEL * 2560))

while (($#)); do
  case "$1" in
    --reps) REPS="$2"; shift 2 ;;
    --model) MODEL="$2"; shift 2 ;;
    --sets) SETS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --spate-only) DO_PEER=0; shift ;;
    --peer-only) DO_SPATE=0; shift ;;
    --threads) THREADS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
for v in REPS ROUNDS THREADS; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "--${v,,} must be a positive integer" >&2; exit 2; }
done
((DO_SPATE || DO_PEER)) || { echo "--spate-only and --peer-only exclude each other" >&2; exit 2; }
[[ -f "$MODEL" ]] || { echo "model not found: $MODEL" >&2; exit 1; }
MODEL_NAME="$(basename "$MODEL")"

log() { echo "[bench_structured] $*" >&2; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# --- 1. binaries --------------------------------------------------------------
SPATE_BIN="${SPATE_BIN:-$BUILD_DIR/spate}"
if ((DO_SPATE)); then
  if [[ "${NO_BUILD:-0}" != 1 ]]; then
    if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
      log "configuring spate in $BUILD_DIR (Release, Ninja)"
      cmake -S "$REPO" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
    fi
    log "building spate in $BUILD_DIR"
    cmake --build "$BUILD_DIR" --target spate >&2
  fi
  [[ -x "$SPATE_BIN" ]] || { log "spate binary missing: $SPATE_BIN"; exit 1; }
fi
PEER_VERSION=""
if ((DO_PEER)); then
  [[ -n "${PEER_BIN:-}" ]] || PEER_BIN="$("$HERE/peer/build_llama_cpp.sh" | tail -n 1)"
  LLAMA_SERVER="$PEER_BIN/llama-server"
  [[ -x "$LLAMA_SERVER" ]] || { log "llama-server missing in $PEER_BIN"; exit 1; }
  PEER_VERSION="$(basename "$(dirname "$PEER_BIN")")"
fi

# --- 2. results file, logs, cleanup ---------------------------------------------
[[ -n "$OUT" ]] || OUT="$HOME/.cache/spate/bench/structured-$(date +%Y%m%d-%H%M%S).jsonl"
mkdir -p "$(dirname "$OUT")"
: > "$OUT"
LOGDIR="${OUT%.jsonl}.logs"
mkdir -p "$LOGDIR"
log "results file: $OUT (server logs in $LOGDIR)"
TMP="$(mktemp -d)"

SERVER_PID=""
SERVER_PORT="$PORT"
SERVER_CMD=""
stop_server() {
  [[ -n "$SERVER_PID" ]] || return 0
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
  fi
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}
CLIENT_PID=""
cleanup() {
  if [[ -n "$CLIENT_PID" ]]; then kill -TERM "$CLIENT_PID" 2>/dev/null || true; wait "$CLIENT_PID" 2>/dev/null || true; fi
  stop_server
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

http_code() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$SERVER_PORT$1" 2>/dev/null || true; }

# The first port >= $PORT (up to +99) that binds on 127.0.0.1 without SO_REUSEADDR.
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

# One JSON object from key=value pairs (values that parse as JSON stay JSON).
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

start_server() {  # engine rep; returns 1 (after recording a failure) when it does not come up
  local engine="$1" rep="$2" ready_path cmd
  SERVER_PORT="$(pick_port)" || { log "no free port from $PORT; set PORT"; exit 1; }
  if [[ "$engine" == spate ]]; then
    cmd=("$SPATE_BIN" serve --model "$MODEL" --threads "$THREADS" --host 127.0.0.1 --port "$SERVER_PORT")
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
  SERVER_LOG="$LOGDIR/$engine-rep$rep.log"
  "${cmd[@]}" > "$SERVER_LOG" 2>&1 &
  SERVER_PID=$!
  local t0=$SECONDS
  while [[ "$(http_code "$ready_path")" != 200 ]]; do
    if ! kill -0 "$SERVER_PID" 2>/dev/null || ((SECONDS - t0 > READY_TIMEOUT)); then
      log "$engine server did not come up: $SERVER_CMD"
      tail -n 20 "$SERVER_LOG" >&2
      stop_server
      record kind=failure engine="$engine" rep="$rep" what=start cmd="$SERVER_CMD"
      return 1
    fi
    sleep 0.2
  done
  log "   $engine ready in $((SECONDS - t0)) s"
}

run_client() {  # engine rep
  local engine="$1" rep="$2" label rc=0 before
  label=$([[ "$engine" == spate ]] && echo spate || echo llama.cpp)
  local cmd=(python3 "$HERE/bench_structured.py" --url "http://127.0.0.1:$SERVER_PORT" --sets "$SETS"
             --rounds "$ROUNDS" --label "$label")
  before="$(loadavg)"
  # In the background and waited for, so that INT/TERM stop the run at once (cleanup kills it).
  timeout "$RUN_TIMEOUT" "${cmd[@]}" > "$TMP/out" 2> "$TMP/err" &
  CLIENT_PID=$!
  wait "$CLIENT_PID" || rc=$?
  CLIENT_PID=""
  if ! grep -q '^{' "$TMP/out"; then
    log "FAILED (rc=$rc): ${cmd[*]}"
    tail -n 20 "$TMP/err" >&2
    record kind=failure engine="$label" rep="$rep" rc="$rc" cmd="${cmd[*]}" stderr="$(tail -c 2000 "$TMP/err")"
    return 0
  fi
  python3 - "$TMP/out" "$label" "$MODEL_NAME" "$rep" "$before" "$(loadavg)" "${cmd[*]}" "$SERVER_CMD" \
      "$PEER_VERSION" >> "$OUT" <<'PY'
import json, sys
path, engine, model, rep, before, after, cmd, server_cmd, ver = sys.argv[1:]
for line in open(path):
    if not line.startswith("{"):
        continue
    o = json.loads(line)
    o.pop("label", None)
    kind = "failure" if "error" in o else "sample"
    s = {"kind": kind, "engine": engine, "model": model, "rep": int(rep), **o,
         "loadavg_before": before, "loadavg_after": after, "cmd": cmd, "server_cmd": server_cmd}
    if engine != "spate":
        s["version"] = ver
    print(json.dumps(s))
PY
  while read -r line; do log "   $label: $line"; done < <(python3 -c '
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        o = json.loads(l)
        print(o["set"], o["mode"], o.get("error") or "%s tok/s, valid %s/%s" % (o["gen_tok_s"], o.get("valid"), o["requests"]))
' "$TMP/out")
}

# --- 3. measurements -------------------------------------------------------------
T0=$SECONDS
record kind=run start="$(date -Is)" host="$(hostname)" ncpu="$(nproc)" threads="$THREADS" reps="$REPS" \
       rounds="$ROUNDS" sets="$SETS" model="$MODEL_NAME" peer_version="$PEER_VERSION" spate_bin="$SPATE_BIN" \
       loadavg_before="$(loadavg)"
log "load average before: $(loadavg) ($(nproc) cpus); $REPS reps of sets $SETS on $MODEL_NAME"
for ((r = 1; r <= REPS; r++)); do
  order=()
  if ((DO_SPATE)); then order+=(spate); fi
  if ((DO_PEER)); then
    if ((r % 2)); then order+=(peer); else order=(peer "${order[@]}"); fi
  fi
  for eng in "${order[@]}"; do
    log "rep $r/$REPS, $eng (load $(loadavg))"
    if start_server "$eng" "$r"; then
      run_client "$eng" "$r"
      stop_server
    fi
  done
done
record kind=run end="$(date -Is)" seconds="$((SECONDS - T0))" loadavg_after="$(loadavg)"
log "load average after: $(loadavg) ($((SECONDS - T0)) s)"

# --- 4. medians and ratios ------------------------------------------------------------
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
sets = run["sets"].split(",")

def med(engine, s, mode, metric="gen_tok_s"):
    v = [x[metric] for x in samples if x["engine"] == engine and x["set"] == s and x["mode"] == mode
         and x.get(metric) is not None]
    return (statistics.median(v), v) if v else (None, [])

def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b

def fmt(x):
    return "-" if x is None else f"{x:.1f}"

def fmtr(x):
    return "-" if x is None else f"{x:.2f}x"

def valid_frac(engine, s):
    v = [x for x in samples if x["engine"] == engine and x["set"] == s and x["mode"] == "constrained"]
    if not v or any(x.get("valid") is None for x in v):
        return "-"
    return f"{sum(x['valid'] for x in v)}/{sum(x['requests'] for x in v)}"

summary = []
for s in sets:
    sc, sc_v = med("spate", s, "constrained")
    su, su_v = med("spate", s, "unconstrained")
    lc, lc_v = med("llama.cpp", s, "constrained")
    lu, lu_v = med("llama.cpp", s, "unconstrained")
    summary.append({"kind": "median", "set": s, "metric": "gen_tok_s",
                    "spate_constrained": sc, "spate_unconstrained": su, "spate_c_over_u": ratio(sc, su),
                    "llama_constrained": lc, "llama_unconstrained": lu, "llama_c_over_u": ratio(lc, lu),
                    "spate_over_llama_constrained": ratio(sc, lc),
                    "samples": {"spate_constrained": sc_v, "spate_unconstrained": su_v,
                                "llama_constrained": lc_v, "llama_unconstrained": lu_v},
                    "valid": {"spate": valid_frac("spate", s), "llama.cpp": valid_frac("llama.cpp", s)}})
with open(path, "a") as f:
    for o in summary:
        f.write(json.dumps(o) + "\n")

print(f"\nconstrained decoding: spate vs llama.cpp {run.get('peer_version') or '-'} on {run.get('model')}, "
      f"{run.get('threads')} threads, 16 streams x {run.get('rounds')} rounds per set, median of {run.get('reps')} reps; "
      f"load average before {run.get('loadavg_before')}, after {run.get('loadavg_after')} ({run.get('ncpu')} cpus)")
print("(generated tok/s, higher is better; c/u = constrained / unconstrained with the same tokens per request)")
hdr = (f"| {'set':<7} | {'spate c':>8} | {'spate u':>8} | {'spate c/u':>9} | {'llama c':>8} | {'llama u':>8} | "
       f"{'llama c/u':>9} | {'spate/llama c':>13} | {'valid spate':>11} | {'valid llama':>11} |")
print(hdr)
print("|" + "|".join("-" * len(c) for c in hdr.split("|")[1:-1]) + "|")
for o in summary:
    print(f"| {o['set']:<7} | {fmt(o['spate_constrained']):>8} | {fmt(o['spate_unconstrained']):>8} | "
          f"{fmtr(o['spate_c_over_u']):>9} | {fmt(o['llama_constrained']):>8} | {fmt(o['llama_unconstrained']):>8} | "
          f"{fmtr(o['llama_c_over_u']):>9} | {fmtr(o['spate_over_llama_constrained']):>13} | "
          f"{o['valid']['spate']:>11} | {o['valid']['llama.cpp']:>11} |")
unmatched = [x for x in samples if x["mode"] == "unconstrained" and not x.get("matched")]
if unmatched:
    print(f"note: {len(unmatched)} unconstrained run(s) had no constrained run to match lengths with "
          f"(fixed max_tokens): their c/u ratio is not like for like")
ncpu = int(run.get("ncpu") or 1)
peak = max((float(x["loadavg_before"].split()[0]) for x in samples), default=0.0)
print(f"peak 1-min load average before a run: {peak:.2f}")
if peak > ncpu + 1:
    print(f"  WARNING: load average {peak:.2f} > {ncpu} cpus + 1: other work shared the machine, "
          f"figures are not comparable")
if failures:
    print(f"{len(failures)} run(s) FAILED: " + "; ".join(
        f"{f.get('engine')} {f.get('set', '')} {f.get('mode', f.get('what', ''))} rep {f.get('rep')}: "
        f"{str(f.get('error', ''))[:120]}" for f in failures))
PY
echo "results: $OUT"
if grep -q '"kind": "failure"' "$OUT"; then exit 1; fi
