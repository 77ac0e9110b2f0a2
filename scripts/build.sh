#!/usr/bin/env bash
# Configures and builds spate (Release) into build/. Idempotent and incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${SPATE_BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
