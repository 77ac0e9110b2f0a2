#!/usr/bin/env bash
# Build llama.cpp (the performance peer) from the llama.cpp sources vendored in
# the pinned llama-cpp-python sdist from PyPI. Nothing of llama.cpp is committed.
#
# Usage: perf/peer/build_llama_cpp.sh [VERSION]
#   VERSION   llama-cpp-python version (default: the pinned one below; keep it
#             in sync with tests/reference/README.md)
# Env:
#   SPATE_PEER_ROOT  install root (default ~/.cache/spate/peer)
#   JOBS             parallel build jobs (default 2)
#   PYTHON           python with pip (default python3)
#
# Builds llama-bench, llama-batched-bench, llama-server and llama-quantize (the
# latter makes the requantized model variants, perf/scripts/make_variants.sh).
#
# Idempotent: if all binaries already exist it only prints the bin dir; if only
# some are missing (e.g. llama-quantize added later) the existing build tree is
# reused and only the missing targets are compiled.
# On success the LAST line of stdout is the bin dir (everything else -> stderr).
set -euo pipefail

PINNED_VERSION=0.3.16
VERSION="${1:-$PINNED_VERSION}"
ROOT="${SPATE_PEER_ROOT:-$HOME/.cache/spate/peer}"
JOBS="${JOBS:-2}"
PYTHON="${PYTHON:-python3}"

PREFIX="$ROOT/$VERSION"
BIN="$PREFIX/bin"
SDIST_DIR="$HOME/.cache/spate/sdist"
SRC="$PREFIX/src/llama.cpp"
BUILD="$PREFIX/build"
# llama-lookup: prompt-lookup decoding, the counterpart of --speculative-config ngram
# (perf/scripts/bench_speculative.sh).
TARGETS=(llama-bench llama-batched-bench llama-server llama-quantize llama-lookup)

log() { echo "[build_llama_cpp] $*" >&2; }

have_all() {
  for t in "${TARGETS[@]}"; do [[ -x "$BIN/$t" ]] || return 1; done
}

if have_all; then
  log "already built: $BIN"
  echo "$BIN"
  exit 0
fi

command -v cmake >/dev/null || { log "cmake not found (apt-get install cmake)"; exit 1; }

# 1. sdist (only sources; --no-binary so we get the .tar.gz with vendor/llama.cpp)
mkdir -p "$SDIST_DIR"
TARBALL="$SDIST_DIR/llama_cpp_python-$VERSION.tar.gz"
if [[ ! -f "$TARBALL" ]]; then
  log "downloading llama-cpp-python==$VERSION sdist"
  "$PYTHON" -m pip download --quiet --no-binary :all: --no-deps \
      "llama-cpp-python==$VERSION" -d "$SDIST_DIR" >&2
fi
[[ -f "$TARBALL" ]] || { log "sdist not found at $TARBALL"; exit 1; }

# 2. extract vendor/llama.cpp
if [[ ! -f "$SRC/CMakeLists.txt" ]]; then
  log "extracting vendor/llama.cpp"
  rm -rf "$SRC" "$PREFIX/src/tmp"
  mkdir -p "$PREFIX/src/tmp"
  tar -xzf "$TARBALL" -C "$PREFIX/src/tmp" "llama_cpp_python-$VERSION/vendor/llama.cpp"
  mv "$PREFIX/src/tmp/llama_cpp_python-$VERSION/vendor/llama.cpp" "$SRC"
  rm -rf "$PREFIX/src/tmp"
fi

# 3. configure + build (Release, native, no CURL, no BLAS, static so bin/ is self-contained)
log "configuring in $BUILD"
cmake -S "$SRC" -B "$BUILD" \
  -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=ON \
  -DGGML_BLAS=OFF \
  -DLLAMA_CURL=OFF \
  -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=ON \
  -DLLAMA_BUILD_TOOLS=ON \
  -DLLAMA_BUILD_SERVER=ON >&2
log "building ${TARGETS[*]} with -j$JOBS"
cmake --build "$BUILD" --config Release -j "$JOBS" --target "${TARGETS[@]}" >&2

mkdir -p "$BIN"
for t in "${TARGETS[@]}"; do
  install -m 0755 "$BUILD/bin/$t" "$BIN/$t"
done
have_all || { log "build finished but binaries missing"; exit 1; }
log "done"
echo "$BIN"
