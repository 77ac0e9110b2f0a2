#!/usr/bin/env bash
# Speculative decoding, side by side in one run, same threads.
#
#  --mode ngram (default): spate without and with --speculative-config ngram
#    (one server; each request toggles "speculative_decoding") at 1, 4 and 16
#    concurrent streams on an input-grounded and an open-ended chat workload;
#    then llama.cpp's prompt lookup (llama-lookup, --draft K vs 0) on the
#    grounded prompts, single stream. Model: the default SmolLM2 Q4_1.
#  --mode draft: the target is the default model's F16 variant
#    (perf/scripts/make_variants.sh), its draft the default Q4_1. spate as above with
#    {"model": draft}; llama.cpp's llama-server with -md draft --draft-max K
#    and without a draft, driven by the same client (plain mode).
# Speculation runs at every batch size here (disable_by_batch_size 0), to show
# where it stops paying. Output: JSON lines (perf/scripts/bench_speculative.py).
#
# Usage: perf/scripts/bench_speculative.sh [--mode ngram|draft] [--reps N] [--k K]
#                                  [--max-tokens N] [--streams 1,4,16] [--skip-spate]
#                                  [--adaptive-k true|false] [--skip-peer]
#   --adaptive-k: spate's per-request draft length (default true, as served:
#   engine/draft_length.h while several requests run; false: k drafts at every decode).
#   Env: SPATE_BIN (default build/spate), SPATE_MODEL (default: fetched
#   SmolLM2), PEER_BIN (default: perf/peer/build_llama_cpp.sh's output),
#   READY_TIMEOUT (300 s). Server logs: /tmp/bench_speculative.*.log.
# Takes about 10 minutes per mode with the defaults on 2 cores.
set -euo pipefail
PERF_TAG=bench_speculative
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$PERF_REPO"
mode=ngram reps=3 k=4 max_tokens=128 streams=1,4,16 skip_spate=0 skip_peer=0 adaptive=true
while (($#)); do
  case "$1" in
    --mode) mode="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --k) k="$2"; shift 2 ;;
    --max-tokens) max_tokens="$2"; shift 2 ;;
    --streams) streams="$2"; shift 2 ;;
    --skip-spate) skip_spate=1; shift ;;
    --skip-peer) skip_peer=1; shift ;;
    --adaptive-k) adaptive="$2"; shift 2 ;;
    -h|--help) perf_help "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
SPATE_BIN="${SPATE_BIN:-build/spate}"
SPATE_MODEL="${SPATE_MODEL:-$(bash scripts/fetch-model.sh)}"
if ((!skip_peer)) || [[ "$mode" == draft ]]; then PEER_BIN="$(perf_peer_bin)"; fi
trap 'perf_server_stop || true' EXIT

case "$mode" in
  ngram)
    target="$SPATE_MODEL"
    spec="{\"method\": \"ngram\", \"num_speculative_tokens\": $k, \"prompt_lookup_min\": 1, \"prompt_lookup_max\": 3, \"disable_by_batch_size\": 0, \"adaptive_k\": $adaptive}" ;;
  draft)
    PEER_BIN="$PEER_BIN" bash perf/scripts/make_variants.sh --model "$SPATE_MODEL" F16 >&2
    stem="$(basename "$SPATE_MODEL")"; stem="${stem%.gguf}"; stem="${stem%.*}"
    target="$HOME/.cache/spate/models/derived/$stem.F16.gguf"
    spec="{\"model\": \"$SPATE_MODEL\", \"num_speculative_tokens\": $k, \"disable_by_batch_size\": 0, \"adaptive_k\": $adaptive}" ;;
  *) echo "--mode must be ngram or draft" >&2; exit 2 ;;
esac

if ((!skip_spate)); then
  port="$(perf_free_port)"
  MODEL="$target" THREADS=2 perf_spate_argv "$port" --speculative-config "$spec"
  perf_server_start spate /ready /tmp/bench_speculative.serve.log "${PERF_ARGV[@]}" || exit 1
  echo "# spate $(basename "$target"), --speculative-config '$spec'" >&2
  python3 perf/scripts/bench_speculative.py --url "http://127.0.0.1:$port" --streams "$streams" --reps "$reps" \
    --max-tokens "$max_tokens" --label "spate $mode adaptive_k=$adaptive"
  perf_server_stop || true
fi
((skip_peer)) && exit 0

if [[ "$mode" == ngram ]]; then
  echo "# llama.cpp llama-lookup --draft $k" >&2
  python3 perf/scripts/bench_speculative.py --llama-lookup "$PEER_BIN/llama-lookup" --model "$SPATE_MODEL" --threads 2 \
    --draft "$k" --reps 1 --max-tokens "$max_tokens"
  exit 0
fi
for with_draft in 0 1; do
  port="$(perf_free_port 18380)"  # skips ports a stopped server left in TIME_WAIT
  extra=()
  label="llama.cpp plain"
  if ((with_draft)); then
    extra=(-md "$SPATE_MODEL" --draft-max "$k" --draft-min 0 -td 2 -cd 40960)
    label="llama.cpp draft"
  fi
  MODEL="$target" THREADS=2 perf_llama_server_argv "$port" "${extra[@]}"
  perf_server_start "$label" /health "/tmp/bench_speculative.peer$with_draft.log" "${PERF_ARGV[@]}" || exit 1
  echo "# $label: ${PERF_ARGV[*]}" >&2
  python3 perf/scripts/bench_speculative.py --url "http://127.0.0.1:$port" --streams "$streams" --reps "$reps" \
    --max-tokens "$max_tokens" --plain-only --label "$label"
  perf_server_stop || true
done
