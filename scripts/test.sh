#!/usr/bin/env bash
# All setup plus the full test suite, on a fresh machine: dependencies, the
# default model, the layering check (no #include crosses a library boundary
# the wrong way), a Release build with -Werror, the C++ tests (ctest) and the
# Python integration tests (pytest) that drive the real binary; then the
# ASan+UBSan build on the C++ tests and the server tests listed below, and 30 s
# of each fuzz target.
# SPATE_REQUIRE_TESTDATA=1: tests that need ../shared/testdata fail, instead
# of skipping, when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
python3 -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt
export SPATE_MODEL="$(bash scripts/fetch-model.sh)"
python3 scripts/check_layering.py
bash scripts/build.sh
export SPATE_BIN="$PWD/build/spate"
export SPATE_REQUIRE_TESTDATA=1
(cd build && ctest --output-on-failure -j 2 --timeout 1200)
python3 -m pytest -q tests/integration

# Hardening (issue 13): the C++ tests and a subset of the server tests under
# AddressSanitizer + UndefinedBehaviorSanitizer (scripts/sanitize.sh asan runs
# all of them), then every fuzz target for 30 s (scripts/fuzz.sh).
SANITIZE_CI_TESTS="${SANITIZE_CI_TESTS:-tests/integration/test_server.py tests/integration/test_http_hardening.py tests/integration/test_failure_injection.py tests/integration/test_soak_short.py tests/integration/test_completions_prompts.py}"
# shellcheck disable=SC2086
bash scripts/sanitize.sh asan $SANITIZE_CI_TESTS
bash scripts/fuzz.sh all "${FUZZ_CI_SECONDS:-30}"
