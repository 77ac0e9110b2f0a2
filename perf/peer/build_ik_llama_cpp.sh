#!/usr/bin/env bash
# Build ik_llama.cpp (the second performance peer, a llama.cpp fork with its own CPU
# kernels: iqk/, run-time repacking, fused MoE) from the sources vendored in the pinned
# ik-llama-cpp-python sdist from PyPI. Nothing of it is committed.
#
# Usage: perf/peer/build_ik_llama_cpp.sh [VERSION]
#   VERSION   ik-llama-cpp-python version (default: the pinned one below)
# Env:
#   SPATE_PEER_ROOT  install root (default ~/.cache/spate/peer); installs to ROOT/ik-VERSION/bin
#   PEER_TARGETS     space-separated targets, e.g. "llama-bench llama-batched-bench llama-quantize"
#                    (the bench tools first; llama-server later); default all four
#   JOBS             parallel build jobs (default 2)
#   PYTHON           python with pip (default python3)
#
# Builds llama-bench, llama-batched-bench, llama-quantize and llama-server with the options of
# build_llama_cpp.sh (Release, GGML_NATIVE, static, no CURL, no BLAS). The sdist lacks
# common/cmake/build-info-gen-cpp.cmake, so the build would stop at "Generating build details
# from Git": common/build-info.cpp is written from build-info.cpp.in and the missing script
# created empty (../../../shared/peers.md). Its iqk/ kernels make the build long: 40-60 minutes
# on 2 cores.
#
# Idempotent like build_llama_cpp.sh: only missing targets are built, in the existing tree.
# On success the LAST line of stdout is the bin dir (everything else -> stderr).
set -euo pipefail

PINNED_VERSION=0.1.5
VERSION="${1:-$PINNED_VERSION}"
ROOT="${SPATE_PEER_ROOT:-$HOME/.cache/spate/peer}"
PREFIX="$ROOT/ik-$VERSION"
PEER_TAG=build_ik_llama_cpp
PEER_PKG=ik-llama-cpp-python
PEER_VENDOR=ik_llama.cpp
TARGETS=(llama-bench llama-batched-bench llama-quantize llama-server)
source "$(dirname "${BASH_SOURCE[0]}")/build_peer.sh"

peer_select_targets
peer_done_if_built
peer_fetch_source

# The build-info workaround.
if [[ ! -f "$SRC/common/cmake/build-info-gen-cpp.cmake" ]]; then
  peer_log "writing common/build-info.cpp (the sdist has no build-info-gen-cpp.cmake)"
  compiler="$(${CC:-cc} --version | head -n 1)"
  target="$(${CC:-cc} -dumpmachine)"
  sed -e "s|@BUILD_NUMBER@|0|" -e "s|@BUILD_COMMIT@|$PEER_PKG-$VERSION|" \
      -e "s|@BUILD_COMPILER@|$compiler|" -e "s|@BUILD_TARGET@|$target|" \
      "$SRC/common/build-info.cpp.in" > "$SRC/common/build-info.cpp"
  mkdir -p "$SRC/common/cmake"
  : > "$SRC/common/cmake/build-info-gen-cpp.cmake"
fi

peer_build_install
