#!/usr/bin/env bash
# All setup plus the full test suite, on a fresh machine: dependencies, the
# default model, the layering check (no #include crosses a library boundary
# the wrong way), a Release build with -Werror, the C++ tests (ctest) and the
# Python integration tests (pytest) that drive the real binary, the real-model
# tests that depend on the kernels' exact outputs once more with the kernels
# capped at AVX2 (SPATE_MAX_ISA=avx2, below), then every
# libFuzzer target for 30 s (scripts/fuzz.sh; its clang build shares ccache
# between clones), then the ASan + UBSan run (scripts/sanitize.sh asan) on a
# subset that fits CI's time: every C++ test but the slow real-model suites
# (the llama.cpp reference, the real-model engine tests, one long grammar
# walk; all of them run unsanitized above), and the server's HTTP hardening, security
# and failure-injection tests against the sanitized binary. The full
# sanitizer runs are `scripts/sanitize.sh asan|tsan`: see docs/development.md, "Sanitizers".
# SPATE_REQUIRE_TESTDATA=1: tests that need ../shared/testdata fail, instead
# of skipping, when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
python3 -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt
# instructor needs an older openai than the other agent frameworks (see
# tests/requirements-instructor.txt): its test runs in a virtualenv of its own.
python3 -m venv build/venv-instructor
build/venv-instructor/bin/python -m pip install --quiet --disable-pip-version-check -r tests/requirements-instructor.txt
export SPATE_MODEL="$(bash scripts/fetch-model.sh)"
export SPATE_GEMMA_MODEL="$(bash scripts/fetch-model.sh gemma3-270m)"
python3 scripts/check_layering.py
bash scripts/build.sh
# No object compiled for AVX2/AVX-512 may hand SIMD code to the rest of a binary (an
# illegal instruction on a CPU without that level): scripts/check_isa_objects.py.
python3 scripts/check_isa_objects.py build
export SPATE_BIN="$PWD/build/spate"
export SPATE_RANDOM_MODELS_DIR="$PWD/build/random-models"
python3 tests/reference/make_random_models.py --out-dir "$SPATE_RANDOM_MODELS_DIR" \
  --check tests/integration/fixtures/random_models.json >/dev/null
export SPATE_REQUIRE_TESTDATA=1
(cd build && ctest --output-on-failure -j 2 --timeout 1200)
python3 -m pytest -q tests/integration tests/docs
SPATE_REQUIRE_INSTRUCTOR=1 build/venv-instructor/bin/python -m pytest -q tests/integration/test_agents_instructor.py
# The real-model tests whose assertions depend on the kernels' exact outputs,
# again with the kernels capped at AVX2 (SPATE_MAX_ISA, read once at start-up
# by spate and by the real-model C++ tests' fixture; the Python tests' servers
# inherit it). CI runs on whatever machine runs this script, with AVX-512 or
# without, and each kernel level rounds its sums in its own order: a tolerance,
# a greedy text or a sampled answer tuned at one level can fail at the other.
# On a CPU without AVX-512 this runs the same level twice. About 4 minutes on
# 2 cores (2026-11-27: ctest 2 min, pytest 2 min). Chosen:
#   C++: the llama.cpp references (logits within tolerance, greedy tokens up to
#     near-ties; SmolLM2, Gemma 3, the random-weight architectures) and bitwise
#     batch invariance of the model runner (alone, batched, staggered, chunked, per KV cache dtype,
#     threads, block sizes; LoRA adapters mixed in a batch). Not Engine.*: they compare the engine's
#     scheduling paths with each other at one level, over that runner.
#   Python: embeddings against llama.cpp's, Gemma's and the LoRA adapters' greedy
#     completions against llama.cpp's, sampled tool calls and structured outputs that must complete,
#     and outputs that must not depend on batching or speculation (quantized KV caches, constrained
#     decoding, a list of prompts, ngram speculation), agent framework runs
#     that must end (test_agents.py: which branch a run takes, call a tool
#     again or answer, is sampled). Not the rest: HTTP, CLI
#     and service behaviour, which does not depend on the numbers, or further
#     paths to the same batch-invariant outputs.
(
  export SPATE_MAX_ISA=avx2
  (cd build && ctest --output-on-failure -j 2 --timeout 1200 \
    -R '^(Models/ReferenceLlamaCpp|Archs/ReferenceRandom|Models/BatchInvariance|Models/BatchInvarianceKvDtype|Lora)\.')
  python3 -m pytest -q tests/integration/test_embeddings.py tests/integration/test_gemma.py \
    tests/integration/test_tool_calls.py tests/integration/test_structured_outputs.py \
    tests/integration/test_constrained_batch_invariance.py tests/integration/test_completions_prompts.py \
    tests/integration/test_speculative.py tests/integration/test_agents.py tests/integration/test_tool_formats.py \
    tests/integration/test_moe.py tests/integration/test_lora.py tests/integration/test_kv_cache_dtypes.py
)
# Open WebUI (PyPI, pinned) against spate in headless Chromium, both its Ollama and OpenAI
# connections, in its own venv (build/venv-openwebui): scripts/openwebui-test.sh. Not run here:
# it is not deterministic yet. Open WebUI 0.12 sends its built-in tools (native function
# calling) with every chat and samples the answer, and SmolLM2 sometimes calls one (seen:
# delete_memory) instead of answering, so "the answer streams" and "the long answer starts"
# fail in some runs (2026-12-07: 5 of 5 passed in four runs, 3 of 5 in a fifth). Run it by hand.
bash scripts/fuzz.sh all 30
SANITIZE_CTEST_ARGS='-E ^(Models/ReferenceLlamaCpp|Engine\.|VocabTrie\.CachedMasksAlongADocumentEqualTheWalk)' \
  bash scripts/sanitize.sh asan tests/integration/test_http_hardening.py tests/integration/test_security.py \
  tests/integration/test_failure_injection.py
