#!/usr/bin/env bash
# All setup plus the full test suite, on a fresh machine: dependencies, the
# default model, a Release build, the C++ tests (ctest) and the Python
# integration tests (pytest) that drive the real binary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
python3 -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt
export SPATE_MODEL="$(bash scripts/fetch-model.sh)"
bash scripts/build.sh
export SPATE_BIN="$PWD/build/spate"
(cd build && ctest --output-on-failure -j 2 --timeout 1200)
python3 -m pytest -q tests/integration
