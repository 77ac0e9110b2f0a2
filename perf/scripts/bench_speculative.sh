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
#   SmolLM2), PEER_BIN (default: perf/peer/build_llama_cpp.sh's output).
# Takes about 10 minutes per mode with the defaults on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
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
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
SPATE_BIN="${SPATE_BIN:-build/spate}"
SPATE_MODEL="${SPATE_MODEL:-$(bash scripts/fetch-model.sh)}"
PEER_BIN="${PEER_BIN:-$(bash perf/peer/build_llama_cpp.sh)}"
pid=""
trap '[[ -n "$pid" ]] && kill $pid 2>/dev/null || true' EXIT

wait_ready() {  # url
  for _ in $(seq 600); do curl -sf "$1" >/dev/null && return 0; sleep 0.5; done
  echo "server at $1 not ready" >&2; exit 1
}
stop_server() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=""; }

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

port=$((20000 + RANDOM % 20000))
if ((!skip_spate)); then
"$SPATE_BIN" serve --model "$target" --port "$port" --threads 2 --speculative-config "$spec" \
  > /tmp/bench_speculative.serve.log 2>&1 &
pid=$!
wait_ready "http://127.0.0.1:$port/ready"
echo "# spate $(basename "$target"), --speculative-config '$spec'" >&2
python3 perf/scripts/bench_speculative.py --url "http://127.0.0.1:$port" --streams "$streams" --reps "$reps" \
  --max-tokens "$max_tokens" --label "spate $mode adaptive_k=$adaptive"
stop_server
fi
((skip_peer)) && exit 0

if [[ "$mode" == ngram ]]; then
  echo "# llama.cpp llama-lookup --draft $k" >&2
  python3 perf/scripts/bench_speculative.py --llama-lookup "$PEER_BIN/llama-lookup" --model "$SPATE_MODEL" --threads 2 \
    --draft "$k" --reps 1 --max-tokens "$max_tokens"
  exit 0
fi
for with_draft in 0 1; do
  port=$((port + 1))  # llama-server does not bind over a stopped server's TIME_WAIT sockets
  args=(-m "$target" -t 2 -tb 2 --parallel 16 -c 40960 --host 127.0.0.1 --port "$port")
  label="llama.cpp plain"
  if ((with_draft)); then
    args+=(-md "$SPATE_MODEL" --draft-max "$k" --draft-min 0 -td 2 -cd 40960)
    label="llama.cpp draft"
  fi
  "$PEER_BIN/llama-server" "${args[@]}" > "/tmp/bench_speculative.peer$with_draft.log" 2>&1 &
  pid=$!
  wait_ready "http://127.0.0.1:$port/health"
  echo "# $label: llama-server ${args[*]}" >&2
  python3 perf/scripts/bench_speculative.py --url "http://127.0.0.1:$port" --streams "$streams" --reps "$reps" \
    --max-tokens "$max_tokens" --plain-only --label "$label"
  stop_server
done
