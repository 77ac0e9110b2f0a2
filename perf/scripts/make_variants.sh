#!/usr/bin/env bash
# Make requantized variants of a GGUF model with llama.cpp's llama-quantize (the
# peer build, perf/peer/build_llama_cpp.sh), for benchmarking spate's other
# weight types against llama.cpp (perf/scripts/bench_vs_llamacpp.sh --model ...).
#
# Usage: perf/scripts/make_variants.sh [--model PATH] [--out DIR] [TYPE]...
#   --model PATH  source model (default ~/.cache/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf)
#   --out DIR     output dir (default ~/.cache/spate/models/derived)
#   TYPE          llama-quantize types (default: Q4_0 Q8_0 Q5_0 Q5_1 Q4_K_M F16)
# Env:
#   PEER_BIN      dir with llama-quantize (default: output of build_llama_cpp.sh)
#   THREADS       llama-quantize threads (default 2)
#
# Output: DIR/<stem>.<TYPE>.gguf, where <stem> is the source file name without
# its ".<type>.gguf" suffix (SmolLM2-135M-Instruct.Q4_1.gguf -> SmolLM2-135M-Instruct).
# llama-quantize's log is kept next to each file as <stem>.<TYPE>.quantize.log
# (it lists the type chosen for every tensor, including K-quant fallbacks).
#
# The source is already quantized, so --allow-requantize is used: tensors are
# dequantized to f32 and quantized again. The values are therefore lossier than
# a quantization from the original f16/bf16 weights (F16 holds exactly the Q4_1
# values), which does not matter for speed measurements.
#
# Idempotent: an existing output file is kept (delete it to redo). Files are
# written to a temporary name and renamed, so an interrupted run leaves no
# half-written model. stdout: one output path per line; diagnostics -> stderr.
set -euo pipefail
PERF_TAG=make_variants
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MODEL="$PERF_DEFAULT_MODEL" OUT="$HOME/.cache/spate/models/derived" THREADS="${THREADS:-2}"
perf_parse_args "--model --out" "$@"
TYPES=("${PERF_POSITIONAL[@]}")
((${#TYPES[@]})) || TYPES=(Q4_0 Q8_0 Q5_0 Q5_1 Q4_K_M F16)

log() { perf_log "$@"; }

[[ -f "$MODEL" ]] || { log "model not found: $MODEL"; exit 1; }
PEER_BIN="$(perf_peer_bin)"
QUANTIZE="$PEER_BIN/llama-quantize"
[[ -x "$QUANTIZE" ]] || { log "llama-quantize missing in $PEER_BIN (run perf/peer/build_llama_cpp.sh)"; exit 1; }

# SmolLM2-135M-Instruct.Q4_1.gguf -> SmolLM2-135M-Instruct
base="$(basename "$MODEL" .gguf)"
stem="${base%.*}"
[[ -n "$stem" ]] || stem="$base"
mkdir -p "$OUT"

for type in "${TYPES[@]}"; do
  dst="$OUT/$stem.$type.gguf"
  qlog="$OUT/$stem.$type.quantize.log"
  if [[ -s "$dst" ]]; then
    log "exists: $dst"
  else
    log "$type: llama-quantize --allow-requantize $(basename "$MODEL") -> $dst"
    tmp="$dst.tmp.$$"
    if ! "$QUANTIZE" --allow-requantize "$MODEL" "$tmp" "$type" "$THREADS" > "$qlog" 2>&1; then
      rm -f "$tmp"
      log "llama-quantize failed for $type, see $qlog:"
      tail -n 20 "$qlog" >&2
      exit 1
    fi
    mv "$tmp" "$dst"
  fi
  # Summary of what llama-quantize did: tensor count per chosen type and the
  # fallbacks it reported (K-quants need rows that are a multiple of 256).
  # A grep that finds nothing fails the pipeline under pipefail: "|| true".
  if [[ -f "$qlog" ]]; then
    counts="$(grep -oE 'converting to [A-Za-z0-9_]+' "$qlog" | awk '{print $3}' | sort | uniq -c |
              awk '{printf "%s%s x%s", sep, $2, $1; sep=", "}' || true)"
    fb="$(grep -oE '[0-9]+ of [0-9]+ tensor\(s\) required fallback quantization' "$qlog" || true)"
    fbto="$(grep -oE 'using fallback quantization [A-Za-z0-9_]+' "$qlog" | awk '{print $4}' | sort | uniq -c |
            awk '{printf "%s%s x%s", sep, $2, $1; sep=", "}' || true)"
    log "  $type: $(du -h "$dst" | cut -f1); tensors -> ${counts:-none reported}; ${fb:-no fallback}${fbto:+ (fallback to $fbto)}"
  fi
  echo "$dst"
done
