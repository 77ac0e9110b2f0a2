#!/usr/bin/env bash
# Three engines side by side (issues 35-37): spate, llama.cpp 0.3.36 and ik_llama.cpp 0.1.5 on
# one GGUF and one thread count, in one run. Written for mixture-of-experts models (a qwen3moe
# or gpt-oss GGUF of perf/scripts/make_moe_model.py, the default), it runs dense models as well
# (SmolLM2, Gemma, the 1B and 8B shapes of make_bench_model.py), at either ISA level.
#
# Usage: perf/scripts/bench_moe.sh [--model PATH] [--threads T] [--reps N] [--serve-reps N]
#                                  [--engines LIST] [--no-serve | --serve-only | --startup-only]
#                                  [--isa avx2|native] [--out FILE]
#   --model PATH   the GGUF (default ~/.cache/spate/models/big/qwen3moe-30b-a3b-q4_0.gguf)
#   --threads T    threads of every engine (default 2)
#   --reps N       rounds (default 3); figures are medians over them
#   --serve-reps N rounds of the serving (default: --reps)
#   --engines L    comma-separated, of spate,llama.cpp,ik_llama.cpp,ik_llama.cpp-plain (default the
#                  first three; ik_llama.cpp-plain: the same binaries with their defaults, so that
#                  ik_llama.cpp's best options and its defaults are both reported; its batched-bench
#                  and server get -fa off, without which 0.1.5 dies as below)
#   --no-serve     the benchmarks only (pp512, tg128, bd16_*); --serve-only: the serving only
#   --startup-only start-up only: per round and engine, a server started on a dropped page cache
#                  (root; else as found) and again right after (a restart); ready_s each
#   --isa avx2     every engine at AVX2: spate with SPATE_MAX_ISA=avx2, the peers' PEER_ISA=avx2
#                  builds (perf/peer/build_peer.sh: GGML_NATIVE off, AVX2+FMA+F16C). On an AVX-512
#                  CPU that is the kernels capped at AVX2, not an AVX2 CPU. Default native
#   --out FILE     results, JSON lines (default ~/.cache/spate/bench/moe-<date>-<time>.jsonl;
#                  runs of record are copied to perf/results/); logs in FILE without .jsonl + .logs/
# Env:
#   BUILD_DIR, NO_BUILD=1, SPATE_BIN   as in the other side-by-side scripts; spate, spate_bench
#                  and roofline_probe come from BUILD_DIR
#   PEER_BIN       llama.cpp's bin dir (default: perf/peer/build_llama_cpp.sh 0.3.36, which
#                  builds what is missing)
#   IK_BIN         ik_llama.cpp's bin dir (default: perf/peer/build_ik_llama_cpp.sh)
#   IK_BENCH_ARGS  ik_llama.cpp's options for its llama-bench (default "-rtr 1 -fmoe 1 -fa 1":
#                  run-time repacking into its row-interleaved types, fused MoE up/gate, flash
#                  attention)
#   IK_ARGS        its options for llama-batched-bench and llama-server, spelled as their common
#                  parser takes them (default "-rtr -fa off"; fused MoE is on by default there).
#                  Flash attention stays off there: with several sequences ik_llama.cpp 0.1.5 dies
#                  with GGML_ASSERT(S > 0) in iqk_fa_templates.h (batched-bench and server alike)
#   SPATE_ARGS     extra `spate serve` arguments (after --kv-cache-memory 1GiB)
#   PEER_ARGS      extra llama-server arguments, both peers (16 slots of PEER_CTX_PER_SLOT, default
#                  512, tokens: 805 MB of KV cache for this shape, as spate's 1 GiB)
#                  PEER_CTX_PER_SLOT=1024 for gpt-oss: its generated vocabulary and the harmony
#                  preamble make serving_bench's prompts 518 tokens (llama-server refuses them at
#                  512, ik_llama.cpp shifts its context)
#   PORT (default 18180), READY_TIMEOUT (server start-up, default 1200 s: a 17 GB model loads
#   and repacks slowly), RUN_TIMEOUT (one benchmark invocation, default 2400 s), SERVE_TIMEOUT
#   (one serving run, default 3600 s)
#
# Each round (engines in an order rotating by round, so that each meets the machine's drift):
#   probe         build/perf/roofline_probe --threads T --reps 3 --bytes 536870912 --json (read GB/s; 512 MiB)
#   spate         spate_bench --model M --threads T --reps 1 --bd-tokens random,zero: pp512, tg128,
#                 bd16_rand and bd16_tok0 after its warm-ups
#   llama.cpp     llama-bench -m M -p 512 -n 128 -t T -r 1 -o jsonl (pp512 and tg128, avg_ts);
#                 llama-batched-bench -m M -c 2048 -b 2048 -ub 512 -t T -tb T -npp 32 -ntg 64
#                 -npl 16 --output-format jsonl (bd16_rand = S_TG: it feeds distinct random tokens)
#   ik_llama.cpp  the same binaries of ik_llama.cpp, llama-bench with IK_BENCH_ARGS (-o json),
#                 llama-batched-bench with IK_ARGS (its Markdown table: it has no JSON output).
#                 Its batched-bench feeds token 0 to every sequence at every position, so every
#                 row of a step routes to the same k experts: bd16_tok0, set against spate's
#                 --bd-tokens zero. Distinct streams are compared by serve16.
#   probe         again
# then, per round and engine, serving: a fresh server (spate serve; llama-server with 16
# slots; the time to ready is ready_s), perf/scripts/serving_bench.py --scenario throughput (16 streaming clients x 2 requests,
# ~120-token prompts, 64 tokens out, ignore_eos): serve16 = generated tok/s over the run.
# The summary (perf/scripts/summarize.py moe) gives medians, min-max, the ratios between the
# engines, and tg128's share of the read bandwidth: tg128 x bytes a token needs / the median
# probed bandwidth, where a token needs roofline_share.py's work_per_token bytes (attention,
# router, expert_used_count of expert_count experts' gate/up/down, output) plus one token_embd row.
# Every engine invocation's stderr goes to the logs. A failed run is recorded ("kind":"failure")
# and the rest goes on; the exit status is then 1.
set -euo pipefail
PERF_TAG=bench_moe
: "${READY_TIMEOUT:=1200}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REPS=3 THREADS=2 OUT="" PORT="${PORT:-18180}" ENGINES="spate,llama.cpp,ik_llama.cpp" BENCH=1 SERVE=1 SERVE_REPS="" STARTUP=0
ISA=native
RUN_TIMEOUT="${RUN_TIMEOUT:-2400}" SERVE_TIMEOUT="${SERVE_TIMEOUT:-3600}"
IK_BENCH_ARGS="${IK_BENCH_ARGS:--rtr 1 -fmoe 1 -fa 1}"
IK_ARGS="${IK_ARGS:--rtr -fa off}"
export PEER_CTX_PER_SLOT="${PEER_CTX_PER_SLOT:-512}"
MODEL="$HOME/.cache/spate/models/big/qwen3moe-30b-a3b-q4_0.gguf"
PP=512 TG=128 BD_NPL=16 BD_NPP=32 BD_NTG=64 CTX=2048

while (($#)); do
  case "$1" in
    --engines) ENGINES="$2"; shift 2 ;;
    --serve-reps) SERVE_REPS="$2"; shift 2 ;;
    --isa) ISA="$2"; shift 2 ;;
    --no-serve) SERVE=0; shift ;;
    --serve-only) BENCH=0; shift ;;
    --startup-only) BENCH=0 SERVE=0 STARTUP=1; shift ;;
    --spate-only|--peer-only) echo "use --engines" >&2; exit 2 ;;
    *) perf_common_option "$@"; shift "$PERF_SHIFT" ;;
  esac
done
perf_check_common
case "$ISA" in
  native) ;;
  avx2) export SPATE_MAX_ISA=avx2 PEER_ISA=avx2 ;;
  *) echo "--isa must be avx2 or native, not '$ISA'" >&2; exit 2 ;;
esac
SERVE_REPS="${SERVE_REPS:-$REPS}"
perf_positive_int --serve-reps "$SERVE_REPS"
((${#MODELS[@]} <= 1)) || { echo "one --model per run" >&2; exit 2; }
((BENCH || SERVE || STARTUP)) || { echo "--no-serve and --serve-only exclude each other" >&2; exit 2; }
IFS=, read -r -a ENGINE_LIST <<< "$ENGINES"
for e in "${ENGINE_LIST[@]}"; do
  [[ "$e" =~ ^(spate|llama\.cpp|ik_llama\.cpp|ik_llama\.cpp-plain)$ ]] || { echo "--engines: unknown engine '$e'" >&2; exit 2; }
done
has_engine() { [[ ",$ENGINES," == *",$1,"* ]]; }

# --- 1. binaries ---------------------------------------------------------------------------------
targets=(roofline_probe)
if has_engine spate; then targets+=(spate_bench spate); fi
perf_build "${targets[@]}"
PROBE="$BUILD_DIR/perf/roofline_probe"
[[ -x "$PROBE" ]] || { perf_log "roofline_probe missing: $PROBE"; exit 1; }
if has_engine spate; then
  SPATE_BENCH="$BUILD_DIR/perf/spate_bench"
  SPATE_BIN="${SPATE_BIN:-$BUILD_DIR/spate}"
  [[ -x "$SPATE_BENCH" && -x "$SPATE_BIN" ]] || { perf_log "spate_bench or spate missing in $BUILD_DIR"; exit 1; }
fi
peer_targets="llama-bench llama-batched-bench"
((SERVE || STARTUP)) && peer_targets+=" llama-server"
peer_dir() {  # SCRIPT [VERSION]: the bin dir the build script prints last (it builds what is missing)
  PEER_TARGETS="$peer_targets" "$PERF_DIR/peer/$1" "${@:2}" | tail -n 1
}
LLAMA_BIN="" IK_BIN="${IK_BIN:-}"
if has_engine llama.cpp; then LLAMA_BIN="${PEER_BIN:-$(peer_dir build_llama_cpp.sh 0.3.36)}"; fi
if { has_engine ik_llama.cpp || has_engine ik_llama.cpp-plain; } && [[ -z "$IK_BIN" ]]; then
  IK_BIN="$(peer_dir build_ik_llama_cpp.sh)"
fi
for bin in $LLAMA_BIN $IK_BIN; do
  for t in $peer_targets; do [[ -x "$bin/$t" ]] || { perf_log "$t missing in $bin"; exit 1; }; done
done

# --- 2. results file -------------------------------------------------------------------------------
perf_results moe "$OUT"
perf_init_tmp

# Runs CMD within RUN_TIMEOUT (stdout -> $PERF_TMP/out, stderr -> $PERF_TMP/err and the logs),
# its wall time in ATTEMPT_S (model loading included). A failure is recorded with the tail of
# stderr; returns the command's status.
attempt() {  # ENGINE WHAT ROUND CMD...
  local engine="$1" what="$2" round="$3" rc=0 t0=$SECONDS; shift 3
  perf_run_timeout "$RUN_TIMEOUT" "$@" > "$PERF_TMP/out" 2> "$PERF_TMP/err" || rc=$?
  ATTEMPT_S=$((SECONDS - t0))
  cp "$PERF_TMP/err" "$PERF_LOGDIR/$engine-$what-round$round.log"
  if ((rc != 0)); then
    perf_client_failed "$rc" "$@"
    perf_record kind=failure engine="$engine" what="$what" round="$round" rc="$rc" cmd="$*" \
      stderr="$(tail -c 2000 "$PERF_TMP/err")"
  fi
  return "$rc"
}

probe() {  # ROUND WHEN
  attempt probe "$2" "$1" "$PROBE" --threads "$THREADS" --reps 3 --bytes 536870912 --json || return 0
  grep '^{' "$PERF_TMP/out" | tail -n 1 > "$PERF_TMP/probe"
  perf_merge --from "$PERF_TMP/probe" kind=probe round="$1" when="$2" loadavg="$(perf_loadavg)" mem_available_mb="$(mem_available_mb)"
  perf_log "   probe ($2): $(cat "$PERF_TMP/probe")"
}

spate_round() {  # ROUND
  local cmd=("$SPATE_BENCH" --model "$MODEL" --threads "$THREADS" --reps 1 --pp "$PP" --tg "$TG"
             --batch "$BD_NPL" --bd-prompt "$BD_NPP" --bd-gen "$BD_NTG" --bd-tokens random,zero)
  attempt spate bench "$1" "${cmd[@]}" || return 0
  perf_merge --from "$PERF_TMP/out" --drop min,max,reps,threads kind=sample round="$1" model="$MODEL_NAME" \
    loadavg="$(perf_loadavg)" mem_available_mb="$(mem_available_mb)" run_s="$ATTEMPT_S" cmd="${cmd[*]}"
  perf_log "   spate ($ATTEMPT_S s): $(grep -h '^{' "$PERF_TMP/out" | cut -d, -f2,3 | tr '\n' ' ')"
}

# llama-bench (pp512, tg128) and llama-batched-bench (bd16) of one peer. ik_llama.cpp's llama-bench
# writes -o json (an array), its batched-bench a Markdown table only; llama.cpp's batched-bench
# JSON may go to either stream.
peer_round() {  # ENGINE BIN ROUND BENCH_OPTIONS BATCHED_OPTIONS
  local engine="$1" bin="$2" round="$3" options="$4" boptions="$5" version fmt=jsonl tok_s extra=() bextra=()
  read -r -a extra <<< "$options"
  read -r -a bextra <<< "$boptions"
  version="$(perf_peer_version "$bin")"
  if [[ "$engine" == ik_llama.cpp* ]]; then fmt=json; else bextra+=(--output-format jsonl); fi
  local cmd=("$bin/llama-bench" -m "$MODEL" -p "$PP" -n "$TG" -t "$THREADS" -r 1 -o "$fmt" "${extra[@]}")
  if attempt "$engine" bench "$round" "${cmd[@]}" &&
     python3 "$PERFLIB" bench-metrics "$PERF_TMP/out" > "$PERF_TMP/metrics"; then
    perf_merge --from "$PERF_TMP/metrics" kind=sample engine="$engine" version="$version" options="$options" \
      round="$round" model="$MODEL_NAME" loadavg="$(perf_loadavg)" mem_available_mb="$(mem_available_mb)" run_s="$ATTEMPT_S" cmd="${cmd[*]}"
    perf_log "   $engine ($ATTEMPT_S s): $(tr '\n' ' ' < "$PERF_TMP/metrics")"
  fi
  local bcmd=("$bin/llama-batched-bench" -m "$MODEL" -c "$CTX" -b 2048 -ub 512 -t "$THREADS" -tb "$THREADS"
              -npp "$BD_NPP" -ntg "$BD_NTG" -npl "$BD_NPL" "${bextra[@]}")
  attempt "$engine" batched "$round" "${bcmd[@]}" || return 0
  # What the figure measures: llama.cpp's batched-bench feeds distinct random tokens (bd16_rand);
  # ik_llama.cpp 0.1.5's feeds token 0 to every sequence at every position (bd16_tok0), so that
  # all rows of a step route to the same experts.
  local metric="bd${BD_NPL}_rand"
  [[ "$engine" == ik_llama.cpp* ]] && metric="bd${BD_NPL}_tok0"
  if tok_s="$(python3 "$PERFLIB" peer-tok-s batched "bd$BD_NPL" "$BD_NPL" "$PERF_TMP/out" "$PERF_TMP/err")"; then
    perf_record kind=sample engine="$engine" version="$version" options="$boptions" metric="$metric" \
      tok_s="$tok_s" round="$round" model="$MODEL_NAME" loadavg="$(perf_loadavg)" mem_available_mb="$(mem_available_mb)" run_s="$ATTEMPT_S" cmd="${bcmd[*]}"
    perf_log "   $engine ($ATTEMPT_S s): $metric $tok_s"
  else
    perf_record kind=failure engine="$engine" what=batched round="$round" cmd="${bcmd[*]}" error="no bd$BD_NPL row"
  fi
}

engine_round() {  # ENGINE ROUND
  case "$1" in
    spate) spate_round "$2" ;;
    llama.cpp) peer_round llama.cpp "$LLAMA_BIN" "$2" "" "" ;;
    ik_llama.cpp) peer_round ik_llama.cpp "$IK_BIN" "$2" "$IK_BENCH_ARGS" "$IK_ARGS" ;;
    ik_llama.cpp-plain) peer_round ik_llama.cpp-plain "$IK_BIN" "$2" "" "-fa off" ;;
  esac
}

# Starts a fresh server of ENGINE (log LOG) and records how long it took to be ready (spate's
# /ready, llama-server's /health: loading and warmup) as metric ready_s with CACHE (cold: the
# page cache dropped first; warm: right after the previous start; as-found). Sets VERSION and
# OPTIONS; returns 1 (recorded) when the server did not start.
start_server() {  # ENGINE ROUND LOG CACHE
  local engine="$1" round="$2" log="$3" cache="$4" rc=0 t0
  VERSION="" OPTIONS=""
  t0="$(date +%s.%N)"
  case "$engine" in
    spate) perf_start_engine spate "$log" --kv-cache-memory 1GiB || rc=$? ;;
    llama.cpp) VERSION="$(perf_peer_version "$LLAMA_BIN")"
               PEER_BIN="$LLAMA_BIN" perf_start_engine peer "$log" || rc=$? ;;
    ik_llama.cpp) OPTIONS="$IK_ARGS"; VERSION="$(perf_peer_version "$IK_BIN")"
                  PEER_BIN="$IK_BIN" PEER_ARGS="$IK_ARGS ${PEER_ARGS:-}" perf_start_engine peer "$log" || rc=$? ;;
    ik_llama.cpp-plain) OPTIONS="-fa off"; VERSION="$(perf_peer_version "$IK_BIN")"
                  PEER_BIN="$IK_BIN" PEER_ARGS="-fa off ${PEER_ARGS:-}" perf_start_engine peer "$log" || rc=$? ;;
  esac
  if ((rc != 0)); then
    perf_record kind=failure engine="$engine" what=serve-start round="$round" cmd="$PERF_SERVER_CMD"
    return 1
  fi
  local ready_s
  ready_s="$(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$t0" "$(date +%s.%N)")"
  perf_record kind=sample engine="$engine" version="$VERSION" options="$OPTIONS" metric=ready_s seconds="$ready_s" \
    cache="$cache" round="$round" model="$MODEL_NAME" mem_available_mb="$(mem_available_mb)" server_cmd="$PERF_SERVER_CMD"
  perf_log "   $engine ready after $ready_s s ($cache page cache)"
}

# Drops the page cache (root only); prints cold, or as-found when it cannot.
drop_page_cache() {
  if sync && { echo 1 > /proc/sys/vm/drop_caches; } 2>/dev/null; then echo cold; else echo as-found; fi
}

# Start-up only: a start from a cold page cache, then a start right after it (a restart).
startup_round() {  # ENGINE ROUND
  local cache
  for when in first restart; do
    if [[ "$when" == first ]]; then cache="$(drop_page_cache)"; else cache=warm; fi
    start_server "$1" "$2" "$PERF_LOGDIR/$1-startup-$when-round$2.log" "$cache" || continue
    perf_server_stop || true
  done
}

# One serving run: a fresh server of ENGINE, serving_bench.py's throughput scenario, the server stopped.
serve_round() {  # ENGINE ROUND
  local engine="$1" round="$2" before
  start_server "$engine" "$round" "$PERF_LOGDIR/$1-serve-round$2.log" as-found || return 0
  before="$(perf_loadavg)"
  if perf_serving_client throughput "$round" "$engine" "$SERVE_TIMEOUT"; then
    perf_merge --from "$PERF_TMP/out" --first --drop label,rep kind=sample engine="$engine" metric=serve16 \
      version="$VERSION" options="$OPTIONS" round="$round" model="$MODEL_NAME" loadavg_before="$before" \
      loadavg="$(perf_loadavg)" mem_available_mb="$(mem_available_mb)" cmd="${PERF_CLIENT_CMD[*]}" server_cmd="$PERF_SERVER_CMD"
    perf_log "   $engine serve16: $(grep -m1 '^{' "$PERF_TMP/out" | cut -c1-160)"
  else
    perf_record kind=failure engine="$engine" what=serve round="$round" cmd="${PERF_CLIENT_CMD[*]}" \
      server_cmd="$PERF_SERVER_CMD" stderr="$(tail -c 2000 "$PERF_TMP/err")"
  fi
  perf_server_stop || true
}

# MemAvailable in MB, recorded with every figure: a 17-19 GB model leaves little of a 23 GB machine,
# and another process's memory then evicts the peers' file pages (llama.cpp reads them back from
# disk at every token) or gets a server killed.
mem_available_mb() { awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo; }

# The engines of round R: ENGINE_LIST rotated by R.
round_order() {  # R
  local n=${#ENGINE_LIST[@]} i
  ORDER=()
  for ((i = 0; i < n; i++)); do ORDER+=("${ENGINE_LIST[$(((i + $1) % n))]}"); done
}

# --- 3. measurements -------------------------------------------------------------------------------
T0=$SECONDS
perf_record kind=run start="$(date -Is)" host="$(hostname)" ncpu="$(nproc)" threads="$THREADS" \
  reps="$REPS" serve_reps="$SERVE_REPS" isa="$ISA" \
  model="$MODEL_NAME" model_path="$MODEL" engines="$ENGINES" pp="$PP" tg="$TG" bd_npl="$BD_NPL" \
  llama_bin="$LLAMA_BIN" ik_bin="$IK_BIN" ik_bench_args="$IK_BENCH_ARGS" ik_args="$IK_ARGS" \
  spate_bin="${SPATE_BIN:-}" spate_commit="$(git -C "$PERF_REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  loadavg_before="$(perf_loadavg)"
perf_log "load average before: $(perf_loadavg) ($(nproc) cpus); $REPS rounds of $ENGINES on $MODEL_NAME"
if ((BENCH)); then
  for ((r = 1; r <= REPS; r++)); do
    round_order "$r"
    perf_log "round $r/$REPS: ${ORDER[*]} (load $(perf_loadavg))"
    probe "$r" before
    for e in "${ORDER[@]}"; do engine_round "$e" "$r"; done
    probe "$r" after
  done
fi
if ((STARTUP)); then
  for ((r = 1; r <= REPS; r++)); do
    round_order "$r"
    for e in "${ORDER[@]}"; do
      perf_log "start-up round $r/$REPS: $e (load $(perf_loadavg))"
      startup_round "$e" "$r"
    done
  done
fi
if ((SERVE)); then
  for ((r = 1; r <= SERVE_REPS; r++)); do
    round_order "$r"
    for e in "${ORDER[@]}"; do
      perf_log "serving round $r/$SERVE_REPS: $e (load $(perf_loadavg))"
      serve_round "$e" "$r"
    done
  done
fi
perf_finish moe "$T0"
