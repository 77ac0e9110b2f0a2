# The shared library of the perf/ shell scripts (perflib.py is the Python side).
# Source it: `source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"` after setting PERF_TAG
# (the prefix of log lines). It sets nothing on the shell's options; scripts
# run under `set -euo pipefail`.
#
# Paths:     PERF_SCRIPTS (perf/scripts), PERF_DIR (perf), PERF_REPO (the checkout)
# Logging:   perf_log MSG (stderr, "[PERF_TAG] MSG"), perf_loadavg (1/5/15 min)
# Arguments: perf_help FILE (the header comment), perf_positive_int OPTION VALUE
# Building:  perf_build TARGET... (BUILD_DIR, default <repo>/build-perf, configured
#            Release/Ninja when missing; NO_BUILD=1 skips the build)
# Peers:     perf_peer_bin (llama.cpp's bin dir: PEER_BIN, else perf/peer/build_llama_cpp.sh,
#            which builds it when missing), perf_peer_version BIN_DIR
# Results:   perf_results NAME [FILE] (sets PERF_OUT, default
#            ~/.cache/spate/bench/NAME-<date>-<time>.jsonl, and PERF_LOGDIR next to it),
#            perf_record KEY=VALUE..., perf_merge ARGS... (perflib.py record / merge into PERF_OUT)
# Servers:   perf_free_port [BASE], perf_spate_argv PORT [ARG...] / perf_llama_server_argv PORT [ARG...]
#            (set the array PERF_ARGV), perf_server_start LABEL READY_PATH LOG CMD...,
#            perf_server_stop, perf_http_code URL
# Clients:   perf_run_timeout SECONDS CMD... (in the background and waited for, so that
#            INT/TERM stop it at once; returns its status)
# Side by side (spate against a peer server or binary):
#            perf_common_option ARGS... (one option of the common set, see below; sets PERF_SHIFT),
#            perf_check_common, perf_side_by_side_binaries TARGET..., perf_engine_order REP,
#            perf_start_engine ENGINE LOG [SPATE_ARG...], perf_client_failed RC CMD...,
#            perf_serving_client SCENARIO REP LABEL SECONDS, perf_finish SUMMARY_KIND T0
# Cleanup:   perf_init_tmp creates PERF_TMP and traps EXIT (perf_cleanup: the client, the
#            server, PERF_TMP) and INT/TERM (exit 130).
# Only one server and one client at a time per script; none of this is for concurrent use.

PERF_SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PERF_DIR="$(cd "$PERF_SCRIPTS/.." && pwd)"
PERF_REPO="$(cd "$PERF_DIR/.." && pwd)"
PERFLIB="$PERF_SCRIPTS/perflib.py"
PERF_TAG="${PERF_TAG:-perf}"
PERF_DEFAULT_MODEL="$HOME/.cache/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf"
READY_TIMEOUT="${READY_TIMEOUT:-300}"
PERF_SERVER_PID=""
PERF_SERVER_CMD=""
PERF_CLIENT_PID=""
PERF_TMP=""

perf_log() { echo "[$PERF_TAG] $*" >&2; }
perf_loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# Prints the comment block after the shebang of FILE, without the "# ".
perf_help() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$1"; }

perf_positive_int() {  # OPTION VALUE: exits 2 unless VALUE is a positive integer
  [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "$1 must be a positive integer" >&2; exit 2; }
}

perf_build() {  # TARGET...
  BUILD_DIR="${BUILD_DIR:-$PERF_REPO/build-perf}"
  [[ "${NO_BUILD:-0}" == 1 ]] && return 0
  if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
    perf_log "configuring spate in $BUILD_DIR (Release, Ninja)"
    cmake -S "$PERF_REPO" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
  fi
  perf_log "building $* in $BUILD_DIR"
  cmake --build "$BUILD_DIR" --target "$@" >&2
}

perf_peer_bin() {
  if [[ -n "${PEER_BIN:-}" ]]; then echo "$PEER_BIN"; return 0; fi
  "$PERF_DIR/peer/build_llama_cpp.sh" | tail -n 1
}
perf_peer_version() { basename "$(dirname "$1")"; }

perf_results() {  # NAME [FILE]
  PERF_OUT="${2:-$HOME/.cache/spate/bench/$1-$(date +%Y%m%d-%H%M%S).jsonl}"
  mkdir -p "$(dirname "$PERF_OUT")"
  : > "$PERF_OUT"
  PERF_LOGDIR="${PERF_OUT%.jsonl}.logs"
  mkdir -p "$PERF_LOGDIR"
  perf_log "results file: $PERF_OUT (logs in $PERF_LOGDIR)"
}
perf_record() { python3 "$PERFLIB" record "$PERF_OUT" "$@"; }
perf_merge() { python3 "$PERFLIB" merge "$PERF_OUT" "$@"; }
perf_free_port() { python3 "$PERFLIB" free-port "$@"; }
perf_http_code() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1" 2>/dev/null || true; }

# spate serve on MODEL (and THREADS when set), extra ARGs, then SPATE_ARGS (word-split).
perf_spate_argv() {  # PORT [ARG...]
  local port="$1"; shift
  PERF_ARGV=("${SPATE_BIN:?SPATE_BIN unset}" serve --model "${MODEL:?MODEL unset}" --host 127.0.0.1 --port "$port")
  [[ -n "${THREADS:-}" ]] && PERF_ARGV+=(--threads "$THREADS")
  # shellcheck disable=SC2206
  PERF_ARGV+=("$@" ${SPATE_ARGS:-})
}

# llama-server with 16 slots of 2560 tokens (PEER_PARALLEL, PEER_CTX_PER_SLOT), extra ARGs,
# then PEER_ARGS (word-split). Needs PEER_BIN, MODEL, THREADS.
perf_llama_server_argv() {  # PORT [ARG...]
  local port="$1"; shift
  local parallel="${PEER_PARALLEL:-16}"
  PERF_ARGV=("${PEER_BIN:?PEER_BIN unset}/llama-server" -m "${MODEL:?MODEL unset}" -t "$THREADS" -tb "$THREADS"
             --parallel "$parallel" -c "$((parallel * ${PEER_CTX_PER_SLOT:-2560}))" --host 127.0.0.1 --port "$port")
  # shellcheck disable=SC2206
  PERF_ARGV+=("$@" ${PEER_ARGS:-})
}

# Starts CMD in the background (output to LOG) and waits until GET READY_PATH on the
# port after its --port (or $PERF_SERVER_PORT) answers 200. Returns 1, with the log's
# tail on stderr, when the server exits first or is not ready within READY_TIMEOUT s.
perf_server_start() {  # LABEL READY_PATH LOG CMD...
  local label="$1" ready="$2" log="$3"; shift 3
  local port="${PERF_SERVER_PORT:-}" prev="" a
  for a in "$@"; do [[ "$prev" == --port ]] && port="$a"; prev="$a"; done
  PERF_SERVER_CMD="$*"
  "$@" > "$log" 2>&1 &
  PERF_SERVER_PID=$!
  local t0=$SECONDS
  while [[ "$(perf_http_code "http://127.0.0.1:$port$ready")" != 200 ]]; do
    if ! kill -0 "$PERF_SERVER_PID" 2>/dev/null; then
      perf_log "$label exited during start-up: $PERF_SERVER_CMD"
      tail -n 20 "$log" >&2
      wait "$PERF_SERVER_PID" 2>/dev/null || true
      PERF_SERVER_PID=""
      return 1
    fi
    if ((SECONDS - t0 > READY_TIMEOUT)); then
      perf_log "$label not ready after ${READY_TIMEOUT}s: $PERF_SERVER_CMD"
      tail -n 20 "$log" >&2
      perf_server_stop
      return 1
    fi
    sleep 0.2
  done
  perf_log "   $label ready in $((SECONDS - t0)) s on port $port"
}

# SIGTERM, up to 10 s for a graceful exit, then SIGKILL. Returns the server's exit status
# (0 when none was running).
perf_server_stop() {
  [[ -n "$PERF_SERVER_PID" ]] || return 0
  local pid="$PERF_SERVER_PID" rc=0
  PERF_SERVER_PID=""
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || rc=$?
  return "$rc"
}

perf_run_timeout() {  # SECONDS CMD...
  local seconds="$1" rc=0; shift
  timeout "$seconds" "$@" &
  PERF_CLIENT_PID=$!
  wait "$PERF_CLIENT_PID" || rc=$?
  PERF_CLIENT_PID=""
  return "$rc"
}

perf_cleanup() {
  if [[ -n "$PERF_CLIENT_PID" ]]; then
    kill -TERM "$PERF_CLIENT_PID" 2>/dev/null || true
    wait "$PERF_CLIENT_PID" 2>/dev/null || true
  fi
  perf_server_stop || true
  [[ -n "$PERF_TMP" ]] && rm -rf "$PERF_TMP"
  return 0
}

perf_init_tmp() {
  PERF_TMP="$(mktemp -d)"
  trap perf_cleanup EXIT
  trap 'perf_log "interrupted"; exit 130' INT TERM
}

# --- side by side --------------------------------------------------------------------------------------
# The common options: --reps N (REPS), --model PATH (MODEL; every one also appended to
# MODELS), --threads T (THREADS), --out FILE (OUT), --spate-only / --peer-only (DO_PEER=0 /
# DO_SPATE=0), -h/--help. A script's own parse loop calls perf_common_option "$@" for any
# option it does not know, then shifts PERF_SHIFT; an unknown option exits 2.
MODELS=()
perf_common_option() {
  PERF_SHIFT=2
  case "$1" in
    --reps) REPS="$2" ;;
    --model) MODEL="$2"; MODELS+=("$2") ;;
    --threads) THREADS="$2" ;;
    --out) OUT="$2" ;;
    --spate-only) DO_PEER=0; PERF_SHIFT=1 ;;
    --peer-only) DO_SPATE=0; PERF_SHIFT=1 ;;
    -h|--help) perf_help "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
}

# Parses ARGS for a script whose only options are common ones (ALLOWED, e.g. "--reps --threads")
# and whose other arguments are positional (appended to PERF_POSITIONAL).
PERF_POSITIONAL=()
perf_parse_args() {  # ALLOWED ARGS...
  local allowed=" $1 -h --help "; shift
  while (($#)); do
    if [[ "$1" != -* ]]; then PERF_POSITIONAL+=("$1"); shift; continue; fi
    [[ "$allowed" == *" $1 "* ]] || { echo "unknown option: $1 (see --help)" >&2; exit 2; }
    perf_common_option "$@"
    shift "$PERF_SHIFT"
  done
}

# Validates the common options (defaults: REPS and THREADS as set by the script, MODEL the
# default model, both engines). Exits 2 on a bad value, 1 when a model file is missing.
perf_check_common() {
  DO_SPATE="${DO_SPATE:-1}" DO_PEER="${DO_PEER:-1}"
  perf_positive_int --reps "$REPS"
  perf_positive_int --threads "$THREADS"
  ((DO_SPATE || DO_PEER)) || { echo "--spate-only and --peer-only exclude each other" >&2; exit 2; }
  MODEL="${MODEL:-$PERF_DEFAULT_MODEL}"
  ((${#MODELS[@]})) || MODELS=("$MODEL")
  local m
  for m in "${MODELS[@]}"; do
    [[ -f "$m" ]] || { echo "model not found: $m" >&2; exit 1; }
  done
  MODEL_NAME="$(basename "$MODEL")"
}

# Builds the spate TARGETs (when DO_SPATE) and finds llama-server (when DO_PEER). Sets
# SPATE_BIN (default $BUILD_DIR/spate), PEER_BIN and PEER_VERSION ("" without the peer).
perf_side_by_side_binaries() {  # TARGET...
  PEER_VERSION=""
  if ((DO_SPATE)); then
    perf_build "$@"
    SPATE_BIN="${SPATE_BIN:-$BUILD_DIR/spate}"
    [[ -x "$SPATE_BIN" ]] || { perf_log "spate binary missing: $SPATE_BIN"; exit 1; }
  fi
  if ((DO_PEER)); then
    PEER_BIN="$(perf_peer_bin)"
    [[ -x "$PEER_BIN/llama-server" ]] || { perf_log "llama-server missing in $PEER_BIN"; exit 1; }
    PEER_VERSION="$(perf_peer_version "$PEER_BIN")"
  fi
}

# PERF_ORDER: the engines of repetition REP, spate first on odd reps, the peer first on even ones,
# so that both see the same drift of a shared machine.
perf_engine_order() {  # REP
  PERF_ORDER=()
  if ((DO_SPATE)); then PERF_ORDER+=(spate); fi
  if ((DO_PEER)); then
    if (($1 % 2)); then PERF_ORDER+=(peer); else PERF_ORDER=(peer "${PERF_ORDER[@]}"); fi
  fi
}

# A fresh server of ENGINE (spate: SPATE_ARGs after the common ones; peer: llama-server with
# 16 slots) on the first free port from $PORT, ready. Sets SERVER_URL. Returns 1 when it
# does not come up (the caller records the failure).
perf_start_engine() {  # ENGINE LOG [SPATE_ARG...]
  local engine="$1" log="$2" port ready_path; shift 2
  port="$(perf_free_port "$PORT")" || { perf_log "no free port from $PORT; set PORT"; exit 1; }
  SERVER_URL="http://127.0.0.1:$port"
  if [[ "$engine" == spate ]]; then
    perf_spate_argv "$port" "$@"
    ready_path=/ready
  else
    perf_llama_server_argv "$port"
    ready_path=/health
  fi
  perf_server_start "$engine" "$ready_path" "$log" "${PERF_ARGV[@]}"
}

# Logs a failed client run with the tail of its stderr ($PERF_TMP/err).
perf_client_failed() {  # RC CMD...
  local rc="$1"; shift
  perf_log "FAILED (rc=$rc): $*"
  tail -n 20 "$PERF_TMP/err" >&2
}

# serving_bench.py's SCENARIO against SERVER_URL within SECONDS, labelled LABEL, as repetition REP
# (1-based): stdout -> $PERF_TMP/out, stderr -> $PERF_TMP/err, the command in the array
# PERF_CLIENT_CMD. Returns 0 when it printed its JSON line; else logs the failure and returns
# its status (1 when it exited 0 without one).
perf_serving_client() {  # SCENARIO REP LABEL SECONDS
  local rc=0
  PERF_CLIENT_CMD=(python3 "$PERF_SCRIPTS/serving_bench.py" --url "$SERVER_URL" --scenario "$1"
                   --rep "$(($2 - 1))" --label "$3")
  perf_run_timeout "$4" "${PERF_CLIENT_CMD[@]}" > "$PERF_TMP/out" 2> "$PERF_TMP/err" || rc=$?
  if ((rc == 0)) && grep -q '^{' "$PERF_TMP/out"; then return 0; fi
  perf_client_failed "$rc" "${PERF_CLIENT_CMD[@]}"
  return $((rc ? rc : 1))
}

# Ends a side-by-side run: the closing "kind":"run" record, the summary of summarize.py KIND
# on stdout, the results path; exits 1 when the results hold a failure, else returns.
perf_finish() {  # KIND T0
  perf_record kind=run end="$(date -Is)" seconds="$((SECONDS - $2))" loadavg_after="$(perf_loadavg)"
  perf_log "load average after: $(perf_loadavg) ($((SECONDS - $2)) s)"
  python3 "$PERF_SCRIPTS/summarize.py" "$1" "$PERF_OUT"
  echo "results: $PERF_OUT"
  if grep -q '"kind": "failure"' "$PERF_OUT"; then exit 1; fi
}

# The engine's label in results ("spate" or "llama.cpp") and its version field for perf_merge.
perf_engine_label() { [[ "$1" == spate ]] && echo spate || echo llama.cpp; }
perf_version_field() { [[ "$1" == spate ]] || echo "version=$PEER_VERSION"; }
