#!/usr/bin/env bash
# Configures and builds spate (Release, -Wall -Wextra -Werror) into build/.
# Idempotent and incremental. Uses ccache when it is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${SPATE_BUILD_DIR:-build}"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # Paths below the checkout are hashed relative to it, so clones share the cache.
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPATE_WERROR=ON "${launcher[@]}" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
