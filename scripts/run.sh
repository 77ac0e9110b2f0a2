#!/usr/bin/env bash
# The main job on a fresh machine: installs dependencies, fetches the default
# model, builds, and runs `spate generate` (offline batched inference) on the
# example prompts. Extra arguments go to `spate generate`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
MODEL="$(bash scripts/fetch-model.sh)"
bash scripts/build.sh
./build/spate generate --model "$MODEL" "$@" < scripts/example-prompts.jsonl
