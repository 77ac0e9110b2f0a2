#!/usr/bin/env bash
# Speculative decoding, side by side in one run: spate without and with
# --speculative-config ngram (one server; each request toggles
# "speculative_decoding"), at 1, 4 and 16 concurrent streams, on an
# input-grounded and an open-ended chat workload; then llama.cpp's prompt
# lookup (llama-lookup, --draft K vs 0) on the grounded prompts, single stream.
# Same model file, same threads. Output: JSON lines (perf/bench_speculative.py).
#
# Usage: perf/bench_speculative.sh [--reps N] [--k K] [--max-tokens N] [--streams 1,4,16]
#   Env: SPATE_BIN (default build/spate), SPATE_MODEL (default: fetched SmolLM2),
#   PEER_BIN (default: perf/peer/build_llama_cpp.sh's output), SPEC_JSON (the
#   whole --speculative-config; default built from --k).
# Takes about 10 minutes with the defaults on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
reps=3 k=4 max_tokens=128 streams=1,4,16
while (($#)); do
  case "$1" in
    --reps) reps="$2"; shift 2 ;;
    --k) k="$2"; shift 2 ;;
    --max-tokens) max_tokens="$2"; shift 2 ;;
    --streams) streams="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
SPATE_BIN="${SPATE_BIN:-build/spate}"
SPATE_MODEL="${SPATE_MODEL:-$(bash scripts/fetch-model.sh)}"
PEER_BIN="${PEER_BIN:-$(bash perf/peer/build_llama_cpp.sh)}"
SPEC_JSON="${SPEC_JSON:-{\"method\": \"ngram\", \"num_speculative_tokens\": $k, \"prompt_lookup_min\": 1, \"prompt_lookup_max\": 3, \"disable_by_batch_size\": 0\}}"
port=$((20000 + RANDOM % 20000))
"$SPATE_BIN" serve --model "$SPATE_MODEL" --port "$port" --threads 2 --speculative-config "$SPEC_JSON" \
  > /tmp/bench_speculative.serve.log 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 600); do curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break; sleep 0.5; done
echo "# spate, --speculative-config '$SPEC_JSON'" >&2
python3 perf/bench_speculative.py --url "http://127.0.0.1:$port" --streams "$streams" --reps "$reps" --max-tokens "$max_tokens"
kill $pid; wait $pid 2>/dev/null || true
echo "# llama.cpp llama-lookup --draft $k" >&2
python3 perf/bench_speculative.py --llama-lookup "$PEER_BIN/llama-lookup" --model "$SPATE_MODEL" --threads 2 \
  --draft "$k" --reps 1 --max-tokens "$max_tokens"
