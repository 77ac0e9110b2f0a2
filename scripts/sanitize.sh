#!/usr/bin/env bash
# Sanitizer runs: builds spate under AddressSanitizer + UndefinedBehaviorSanitizer
# (asan) or ThreadSanitizer (tsan) into build-asan / build-tsan, then runs the
# C++ tests (ctest) and the Python server tests (pytest) against the sanitized
# binary. Any report fails the run: the sanitizers abort the process (tests),
# and the server fixture (tests/integration/spate_server.py) fails a test whose
# server log holds a report (SPATE_SANITIZER=1).
#
# Usage: scripts/sanitize.sh asan|tsan [pytest args...]
#   extra arguments go to pytest (e.g. -k server, or a file list); default: all
#   of tests/integration.
# Env: SANITIZE_JOBS (build jobs, default nproc); SANITIZE_CTEST_ARGS (extra
# ctest arguments, word-split, e.g. -E '^Models/' to leave out slow suites).
# Suppressions: none. Idempotent and incremental (ccache when installed).
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-}"
shift || true
case "$kind" in
  asan) flavour=address ;;
  tsan) flavour=thread ;;
  *) echo "usage: scripts/sanitize.sh asan|tsan [pytest args...]" >&2; exit 2 ;;
esac
BUILD_DIR="build-$kind"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
  # Debug info (-g) makes ccache hash the build directory; without this, clones
  # never share the cache. (The objects then name the first clone's directory
  # in DW_AT_comp_dir, which only matters to a debugger.)
  export CCACHE_NOHASHDIR=1
fi
# No -Werror: GCC warns falsely (maybe-uninitialized in Boost.Beast) under -fsanitize.
# Perf binaries are not needed.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSPATE_SANITIZE="$flavour" -DSPATE_BUILD_PERF=OFF -DSPATE_WERROR=OFF "${launcher[@]}" >/dev/null
cmake --build "$BUILD_DIR" -j "${SANITIZE_JOBS:-$(nproc)}"
# Sanitizer builds inline differently: check their ISA objects too (scripts/check_isa_objects.py).
python3 scripts/check_isa_objects.py "$BUILD_DIR"
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
export SPATE_SANITIZER=1
export SPATE_MODEL="${SPATE_MODEL:-$(bash scripts/fetch-model.sh)}"
export SPATE_GEMMA_MODEL="${SPATE_GEMMA_MODEL:-$(bash scripts/fetch-model.sh gemma3-270m)}"
export SPATE_RANDOM_MODELS_DIR="$PWD/$BUILD_DIR/random-models"
python3 tests/reference/make_random_models.py --out-dir "$SPATE_RANDOM_MODELS_DIR" \
  --check tests/integration/fixtures/random_models.json >/dev/null
export SPATE_BIN="$PWD/$BUILD_DIR/spate"
export SPATE_REQUIRE_TESTDATA="${SPATE_REQUIRE_TESTDATA:-1}"
start=$(date +%s)
# shellcheck disable=SC2086
(cd "$BUILD_DIR" && ctest --output-on-failure -j 2 --timeout 2400 ${SANITIZE_CTEST_ARGS:-})
if (($#)); then
  python3 -m pytest -q "$@"
else
  python3 -m pytest -q tests/integration
fi
echo "sanitize.sh $kind: no reports; tests took $(( $(date +%s) - start )) s" >&2
