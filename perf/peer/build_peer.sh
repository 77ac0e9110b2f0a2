# The steps shared by build_llama_cpp.sh and build_ik_llama_cpp.sh: a C++ peer built from
# the sources vendored in a PyPI sdist. Source it from a script running under
# `set -euo pipefail`, after setting:
#   PEER_TAG      prefix of log lines
#   PEER_PKG      the PyPI package (e.g. llama-cpp-python)
#   PEER_VENDOR   the folder under vendor/ in the sdist (e.g. llama.cpp)
#   VERSION       the package version
#   PREFIX        install prefix: sources in PREFIX/src/PEER_VENDOR, build tree PREFIX/build,
#                 binaries PREFIX/bin
#   TARGETS       array of the CMake targets to build and install
# Env read: PEER_TARGETS (space-separated targets replacing TARGETS), JOBS (default 2),
# PYTHON (default python3), PEER_AMX (1: keep AMX, see below), PEER_ISA (avx2: see below).
#
# PEER_ISA=avx2: a build for AVX2+FMA+F16C only, without -march=native (GGML_NATIVE=OFF,
# GGML_AVX2/FMA/F16C on, every AVX-512 option off), installed under PREFIX-avx2. It is the
# counterpart of spate's SPATE_MAX_ISA=avx2 on an AVX-512 machine (issue 37): both sides at one
# level. A capped build on a Zen 5 or a Xeon is still not an AVX2 CPU; say which was measured.
#
# AMX: on a CPU with AMX (Intel Sapphire Rapids and later), GGML_NATIVE turns on llama.cpp's
# AMX matmuls, and llama.cpp 0.3.36's llama-bench died in ggml_backend_amx_mul_mat (SIGSEGV,
# any model) on such a VM. So the build adds -mno-amx-tile -mno-amx-int8 -mno-amx-bf16 there
# (the rest of -march=native stays) unless PEER_AMX=1; spate has no AMX kernels either.
#
# Functions: peer_log MSG, peer_select_targets (applies PEER_TARGETS), peer_done_if_built
# (prints the bin dir and exits 0 when every target is installed), peer_fetch_source (sdist to
# ~/.cache/spate/sdist, vendor tree extracted once), peer_build_install CMAKE_ARG... (configure
# Release, native, static, no CURL, no BLAS, plus the ARGs; build the targets; install them; print
# the bin dir as the last stdout line). Everything but that line goes to stderr.

case "${PEER_ISA:-native}" in
  native) ;;
  avx2) PREFIX="$PREFIX-avx2" ;;
  *) echo "[$PEER_TAG] PEER_ISA must be native or avx2, not '$PEER_ISA'" >&2; exit 2 ;;
esac
BIN="$PREFIX/bin"
SRC="$PREFIX/src/$PEER_VENDOR"
BUILD="$PREFIX/build"
SDIST_DIR="$HOME/.cache/spate/sdist"
JOBS="${JOBS:-2}"
PYTHON="${PYTHON:-python3}"

peer_log() { echo "[$PEER_TAG] $*" >&2; }

peer_select_targets() {
  if [[ -n "${PEER_TARGETS:-}" ]]; then
    read -r -a TARGETS <<< "$PEER_TARGETS"
    ((${#TARGETS[@]})) || { peer_log "PEER_TARGETS is blank"; exit 2; }
  fi
}

peer_have_all() {
  local t
  for t in "${TARGETS[@]}"; do [[ -x "$BIN/$t" ]] || return 1; done
}

peer_done_if_built() {
  if peer_have_all; then
    peer_log "already built: $BIN (${TARGETS[*]})"
    echo "$BIN"
    exit 0
  fi
  command -v cmake >/dev/null || { peer_log "cmake not found (apt-get install cmake)"; exit 1; }
}

peer_fetch_source() {
  local dist="${PEER_PKG//-/_}-$VERSION"
  local tarball="$SDIST_DIR/$dist.tar.gz"
  mkdir -p "$SDIST_DIR"
  if [[ ! -f "$tarball" ]]; then
    peer_log "downloading $PEER_PKG==$VERSION sdist"
    # --no-binary: the .tar.gz with vendor/, not a wheel.
    "$PYTHON" -m pip download --quiet --no-binary :all: --no-deps "$PEER_PKG==$VERSION" -d "$SDIST_DIR" >&2
  fi
  [[ -f "$tarball" ]] || { peer_log "sdist not found at $tarball"; exit 1; }
  if [[ ! -f "$SRC/CMakeLists.txt" ]]; then
    peer_log "extracting vendor/$PEER_VENDOR"
    rm -rf "$SRC" "$PREFIX/src/tmp"
    mkdir -p "$PREFIX/src/tmp"
    tar -xzf "$tarball" -C "$PREFIX/src/tmp" "$dist/vendor/$PEER_VENDOR"
    mv "$PREFIX/src/tmp/$dist/vendor/$PEER_VENDOR" "$SRC"
    rm -rf "$PREFIX/src/tmp"
  fi
}

peer_build_install() {  # CMAKE_ARG...
  local no_amx=""
  if [[ "${PEER_AMX:-0}" != 1 ]] && grep -qw amx_tile /proc/cpuinfo 2>/dev/null; then
    no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    peer_log "CPU with AMX: building without it ($no_amx; PEER_AMX=1 keeps it)"
  fi
  local isa=(-DGGML_NATIVE=ON)
  if [[ "${PEER_ISA:-native}" == avx2 ]]; then
    no_amx=""
    isa=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
         -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF
         -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
    peer_log "PEER_ISA=avx2: AVX2+FMA+F16C only, no -march=native"
  fi
  peer_log "configuring in $BUILD"
  cmake -S "$SRC" -B "$BUILD" \
    -DCMAKE_C_FLAGS="$no_amx" \
    -DCMAKE_CXX_FLAGS="$no_amx" \
    -DCMAKE_BUILD_TYPE=Release \
    "${isa[@]}" \
    -DGGML_BLAS=OFF \
    -DLLAMA_CURL=OFF \
    -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=ON \
    -DLLAMA_BUILD_SERVER=ON "$@" >&2
  peer_log "building ${TARGETS[*]} with -j$JOBS"
  cmake --build "$BUILD" --config Release -j "$JOBS" --target "${TARGETS[@]}" >&2
  mkdir -p "$BIN"
  local t
  for t in "${TARGETS[@]}"; do
    install -m 0755 "$BUILD/bin/$t" "$BIN/$t"
  done
  peer_have_all || { peer_log "build finished but binaries missing"; exit 1; }
  peer_log "done"
  echo "$BIN"
}
