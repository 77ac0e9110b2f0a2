#!/usr/bin/env bash
# The soak: starts `spate serve` on the default model on a free loopback port,
# runs perf/scripts/soak.py against it, stops it (SIGTERM; the drain must end
# cleanly), and exits with the soak's status.
#
# Usage: perf/scripts/soak.sh [--duration-s 1800] [--connections 64] [soak.py args...]
# Env: SPATE_BIN (default build/spate), SPATE_MODEL (default: scripts/fetch-model.sh),
#      SPATE_ARGS (extra `spate serve` arguments, word-split), READY_TIMEOUT (300 s).
set -euo pipefail
PERF_TAG=soak
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ "${1:-}" == -h || "${1:-}" == --help ]] && { perf_help "$0"; exit 0; }
cd "$PERF_REPO"
SPATE_BIN="${SPATE_BIN:-$PWD/build/spate}"
MODEL="${SPATE_MODEL:-$(bash scripts/fetch-model.sh)}"
LOG="$(mktemp /tmp/spate-soak-XXXXXX.log)"
trap 'perf_server_stop || true' EXIT
PORT="$(perf_free_port)"
perf_spate_argv "$PORT" --served-model-name soak
perf_server_start "spate serve" /ready "$LOG" "${PERF_ARGV[@]}" || { echo "log: $LOG" >&2; exit 1; }
status=0
python3 "$PERF_SCRIPTS/soak.py" --url "http://127.0.0.1:$PORT" --pid "$PERF_SERVER_PID" --model-name soak "$@" || status=$?
perf_server_stop || { echo "spate serve exited with $? on SIGTERM; log: $LOG" >&2; status=1; }
echo "server log: $LOG" >&2
exit $status
