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
#   PEER_TARGETS     space-separated targets to build and install, e.g.
#                    "llama-bench llama-batched-bench llama-quantize" (the bench
#                    tools alone, before the slow llama-server); default: all of
#                    TARGETS below
#
# Builds llama-bench, llama-batched-bench, llama-server and llama-quantize (the
# latter makes the requantized model variants, perf/scripts/make_variants.sh).
# llama-server pulls in the multimodal library, most of the build's time.
#
# Idempotent: if all binaries already exist it only prints the bin dir; if only
# some are missing (e.g. llama-quantize added later) the existing build tree is
# reused and only the missing targets are compiled.
# On success the LAST line of stdout is the bin dir (everything else -> stderr).
# The steps are perf/peer/build_peer.sh's.
set -euo pipefail

PINNED_VERSION=0.3.16
VERSION="${1:-$PINNED_VERSION}"
ROOT="${SPATE_PEER_ROOT:-$HOME/.cache/spate/peer}"
PREFIX="$ROOT/$VERSION"
PEER_TAG=build_llama_cpp
PEER_PKG=llama-cpp-python
PEER_VENDOR=llama.cpp
# llama-lookup: prompt-lookup decoding, the counterpart of --speculative-config ngram
# (perf/scripts/bench_speculative.sh).
TARGETS=(llama-bench llama-batched-bench llama-server llama-quantize llama-lookup)
source "$(dirname "${BASH_SOURCE[0]}")/build_peer.sh"

peer_select_targets
peer_done_if_built
peer_fetch_source
peer_build_install -DLLAMA_BUILD_TOOLS=ON
