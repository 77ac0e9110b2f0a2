#!/usr/bin/env bash
# The main job on a fresh machine: installs dependencies, fetches the default
# model, builds, and runs `spate serve` (the OpenAI-compatible server) on it
# until stopped (Ctrl-C / SIGTERM drains and exits 0). Extra arguments go to
# `spate serve`, e.g. --port 8000 --api-key KEY.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
MODEL="$(bash scripts/fetch-model.sh)"
bash scripts/build.sh
exec ./build/spate serve --model "$MODEL" "$@"
