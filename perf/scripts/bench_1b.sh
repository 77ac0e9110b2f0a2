#!/usr/bin/env bash
# A 1B-class model side by side with llama.cpp (issue 14): a random-weight
# `llama` GGUF with Llama-3.2-1B's shape (hidden 2048, 16 layers, 32/8 heads,
# FFN 8192) and SmolLM2's vocabulary, written by perf/scripts/make_bench_model.py in
# F16, quantized by the peer's llama-quantize (perf/scripts/make_variants.sh) to the
# given types, then perf/scripts/bench_vs_llamacpp.sh (pp512, tg128, bd16) on each.
#
# Usage: perf/scripts/bench_1b.sh [--reps N] [--threads T] [TYPE]...
#   TYPE     llama-quantize types (default: Q4_0 Q4_K_M)
#   --reps   rounds per model (default 3); --threads: both engines (default 2)
# Env: as bench_vs_llamacpp.sh (BUILD_DIR, NO_BUILD, PEER_BIN).
# Models are cached in ~/.cache/spate/models/bench/ (F16 2.1 GB, Q4_0 0.6 GB,
# Q4_K_M 0.7 GB); delete them to redo. Needs the PyPI gguf and numpy packages.
set -euo pipefail
PERF_TAG=bench_1b
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
REPS=3
THREADS=2
perf_parse_args "--reps --threads" "$@"
perf_positive_int --reps "$REPS"
perf_positive_int --threads "$THREADS"
TYPES=("${PERF_POSITIONAL[@]}")
((${#TYPES[@]})) || TYPES=(Q4_0 Q4_K_M)
DIR="$HOME/.cache/spate/models/bench"
mkdir -p "$DIR"
F16="$DIR/llama-1b-shape.F16.gguf"
if [[ ! -f "$F16" ]]; then
  perf_log "writing $F16 (random weights)"
  python3 "$PERF_SCRIPTS/make_bench_model.py" --out "$F16" >&2
fi
MODELS=()
while read -r path; do MODELS+=(--model "$path"); done < <(THREADS="$THREADS" "$PERF_SCRIPTS/make_variants.sh" --model "$F16" --out "$DIR" "${TYPES[@]}")
exec "$PERF_SCRIPTS/bench_vs_llamacpp.sh" --reps "$REPS" --threads "$THREADS" "${MODELS[@]}"
