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
