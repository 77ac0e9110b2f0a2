#!/usr/bin/env bash
# The soak (issue 13): starts `spate serve` on the default model on a free
# loopback port, runs perf/scripts/soak.py against it, stops it (SIGTERM; the drain
# must end cleanly), and exits with the soak's status.
#
# Usage: perf/scripts/soak.sh [--duration-s 1800] [--connections 64] [soak.py args...]
# Env: SPATE_BIN (default build/spate), SPATE_MODEL (default: scripts/fetch-model.sh),
#      SPATE_ARGS (extra `spate serve` arguments, word-split).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${SPATE_BIN:-$PWD/build/spate}"
MODEL="${SPATE_MODEL:-$(bash scripts/fetch-model.sh)}"
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
LOG="$(mktemp /tmp/spate-soak-XXXXXX.log)"
# shellcheck disable=SC2086
"$BIN" serve --model "$MODEL" --host 127.0.0.1 --port "$PORT" --served-model-name soak ${SPATE_ARGS:-} > "$LOG" 2>&1 &
PID=$!
trap 'kill -TERM $PID 2>/dev/null || true' EXIT
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$PORT/ready" >/dev/null && break
  kill -0 $PID 2>/dev/null || { echo "spate serve exited; log: $LOG" >&2; tail -20 "$LOG" >&2; exit 1; }
  sleep 0.5
done
status=0
python3 perf/scripts/soak.py --url "http://127.0.0.1:$PORT" --pid "$PID" --model-name soak "$@" || status=$?
kill -TERM $PID
wait $PID || { echo "spate serve exited with $? on SIGTERM; log: $LOG" >&2; status=1; }
trap - EXIT
echo "server log: $LOG" >&2
exit $status
