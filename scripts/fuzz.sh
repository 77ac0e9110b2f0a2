#!/usr/bin/env bash
# Runs one libFuzzer target (fuzz/) for a while, or all of them one after another.
#
# Usage: scripts/fuzz.sh TARGET|all SECONDS
#   TARGET   gguf | request | tokenizer | jinja | http | ws
# Builds build-fuzz with Debian's clang (-DSPATE_FUZZ=ON: ASan + UBSan +
# coverage), copies the seed corpus fuzz/corpus/TARGET to a work corpus
# (build-fuzz/corpus/TARGET, kept between runs), runs the target for SECONDS
# (-max_len 64 KiB, -rss_limit_mb 2048, 1 job), prints the last status line
# (execs/s, cov, ft, corpus) and exits non-zero on a crash, leak, timeout or
# sanitizer report; the crashing input is left in build-fuzz/artifacts/.
# The request, ws and tokenizer targets load the default model's text side
# (scripts/fetch-model.sh). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-}"
seconds="${2:-}"
all=(gguf request tokenizer jinja http ws)
if [[ -z "$target" || -z "$seconds" ]]; then
  echo "usage: scripts/fuzz.sh TARGET|all SECONDS  (targets: ${all[*]})" >&2
  exit 2
fi
if [[ "$target" == all ]]; then
  for t in "${all[@]}"; do "$0" "$t" "$seconds"; done
  exit 0
fi
[[ " ${all[*]} " == *" $target "* ]] || { echo "unknown target '$target' (${all[*]})" >&2; exit 2; }
command -v clang++ >/dev/null || { echo "clang++ is missing: bash scripts/install-deps.sh" >&2; exit 1; }
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
  # Debug info (-g) makes ccache hash the build directory; without this, clones
  # never share the cache. (The objects then name the first clone's directory
  # in DW_AT_comp_dir, which only matters to a debugger.)
  export CCACHE_NOHASHDIR=1
fi
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ \
  -DSPATE_FUZZ=ON -DSPATE_BUILD_TESTS=OFF -DSPATE_BUILD_PERF=OFF "${launcher[@]}" >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target "fuzz_$target" > build-fuzz/build.log 2>&1 || {
  tail -30 build-fuzz/build.log >&2
  exit 1
}
export SPATE_FUZZ_MODEL="${SPATE_FUZZ_MODEL:-$(bash scripts/fetch-model.sh)}"
work="build-fuzz/corpus/$target"
mkdir -p "$work" build-fuzz/artifacts
cp -n fuzz/corpus/"$target"/* "$work"/ 2>/dev/null || true
# The real chat templates of ../shared/testdata join the Jinja seeds when present (not committed here).
if [[ "$target" == jinja && -d ../shared/testdata/chat-templates ]]; then
  for f in ../shared/testdata/chat-templates/*.jinja; do
    dst="$work/shared-$(basename "$f")"
    [[ -f "$dst" ]] || { cat "$f"; printf '\0{"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}],"add_generation_prompt":true}'; } > "$dst"
  done
fi
dict=()
[[ -f "fuzz/$target.dict" ]] && dict=(-dict="fuzz/$target.dict")
log="build-fuzz/fuzz-$target.log"
status=0
ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" UBSAN_OPTIONS="print_stacktrace=1" \
  "build-fuzz/fuzz/fuzz_$target" "$work" "${dict[@]}" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
  -timeout=25 -print_final_stats=1 -artifact_prefix=build-fuzz/artifacts/"$target"- > "$log" 2>&1 || status=$?
last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
execs=$(grep -E 'stat::number_of_executed_units' "$log" | awk '{print $2}' || true)
echo "fuzz $target: ${seconds}s, $execs execs ($(( ${execs:-0} / seconds ))/s); last: $last; exit $status" >&2
if ((status != 0)); then
  grep -E "ERROR|SUMMARY|runtime error|deadly signal|Test unit written" "$log" | head -20 >&2
  exit 1
fi
