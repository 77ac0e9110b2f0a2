#!/usr/bin/env bash
# Open WebUI (PyPI open-webui, pinned in tests/requirements-openwebui.txt)
# against spate in headless Chromium: tests/integration/openwebui/test_openwebui.py.
# Installs Open WebUI into build/venv-openwebui once (a marker file holds the
# requirements' hash: a changed pin reinstalls), then runs the test with the
# system python (selenium from tests/requirements.txt, Debian's chromedriver).
# The test itself starts spate (build/spate, the default model) and Open WebUI
# on loopback; nothing is fetched at run time.
# Needs: scripts/install-deps.sh (chromium, chromium-driver), scripts/build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/venv-openwebui
req=tests/requirements-openwebui.txt
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [[ ! -x "$venv/bin/open-webui" || "$(cat "$venv/.installed" 2>/dev/null)" != "$want" ]]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  # --no-deps: the file lists every package (open-webui's own requirements would pull torch & co).
  timeout 1200 "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r "$req"
  echo "$want" > "$venv/.installed"
fi
export SPATE_MODEL="${SPATE_MODEL:-$(bash scripts/fetch-model.sh)}"
export SPATE_BIN="${SPATE_BIN:-$PWD/build/spate}"
export SPATE_OPENWEBUI_BIN="$PWD/$venv/bin/open-webui"
export SPATE_REQUIRE_OPENWEBUI=1
timeout 900 python3 -m pytest -q tests/integration/openwebui/test_openwebui.py "$@"
