#!/usr/bin/env bash
# All setup plus the full test suite, on a fresh machine: dependencies, the
# default model, the layering check (no #include crosses a library boundary
# the wrong way), a Release build with -Werror, the C++ tests (ctest) and the
# Python integration tests (pytest) that drive the real binary, then every
# libFuzzer target for 30 s (scripts/fuzz.sh; its clang build shares ccache
# between clones), then the ASan + UBSan run (scripts/sanitize.sh asan) on a
# subset that fits CI's time: every C++ test but the slow real-model suites
# (the llama.cpp reference, the real-model engine tests, one long grammar
# walk; all of them run unsanitized above), and the server's HTTP hardening
# and failure-injection tests against the sanitized binary. The full
# sanitizer runs are `scripts/sanitize.sh asan|tsan`: see README.md, "Hardening".
# SPATE_REQUIRE_TESTDATA=1: tests that need ../shared/testdata fail, instead
# of skipping, when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
python3 -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt
export SPATE_MODEL="$(bash scripts/fetch-model.sh)"
export SPATE_GEMMA_MODEL="$(bash scripts/fetch-model.sh gemma3-270m)"
python3 scripts/check_layering.py
bash scripts/build.sh
export SPATE_BIN="$PWD/build/spate"
export SPATE_RANDOM_MODELS_DIR="$PWD/build/random-models"
python3 tests/reference/make_random_models.py --out-dir "$SPATE_RANDOM_MODELS_DIR" \
  --check tests/integration/fixtures/random_models.json >/dev/null
export SPATE_REQUIRE_TESTDATA=1
(cd build && ctest --output-on-failure -j 2 --timeout 1200)
python3 -m pytest -q tests/integration
bash scripts/fuzz.sh all 30
SANITIZE_CTEST_ARGS='-E ^(Models/ReferenceLlamaCpp|Engine\.|VocabTrie\.CachedMasksAlongADocumentEqualTheWalk)' \
  bash scripts/sanitize.sh asan tests/integration/test_http_hardening.py tests/integration/test_failure_injection.py
