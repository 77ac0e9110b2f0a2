// The machine's rooflines (issue 14): read bandwidth from memory, and the
// int8 (vpmaddubsw) and fp32 (vfmadd) multiply-add peaks, each with every
// worker thread busy. Each probe is bound by what it measures:
//   * bandwidth: a buffer far larger than the last-level cache, streamed once
//     per pass, folded into 8 independent accumulators (so add latency never
//     limits the loads), a different buffer region per thread; backed by
//     transparent huge pages (MADV_HUGEPAGE) as spate's packed weights are,
//     unless --small-pages;
//   * int8 / fp32: 12 independent accumulator chains per thread (more than
//     latency x throughput of the unit), operands that change every
//     iteration so nothing is loop-invariant, and a data dependence that
//     keeps the compiler from folding the loop.
// The inner loops over the accumulators are unrolled (#pragma GCC unroll): rolled,
// GCC kept the accumulator arrays on the stack, and every probe then measured a
// store-to-load round trip per instruction instead of its unit (before the fix, on
// a Zen 5 EPYC: vpdpbusd 367 GMAC/s on two threads against 1050 unrolled, 512-bit
// FMA 82 against 266; docs/journal/performance.md, "The probe's compute peaks were too low").
// It also measures the int8 ceiling of the matmul kernels' own instruction mix per
// 32-element block at each level: avx2 (maddubs_block_loop: vpmaddubsw, the vpaddw and
// vpmaddwd that fold them, and the float ops that scale a block's int32 sum) and, where
// the CPU has AVX-512 VNNI, avx512 (dpbusd_block_loop: vpdpbusd plus the 2 or 3 float
// operations on the same pipes): the rate no kernel of those weight formats can pass at
// that level; roofline_share.py's *_kernel shares divide by it.
// Each figure is the median of --reps passes.
//
// Units: GB/s = 1e9 bytes/s. "GMAC/s" counts multiply-adds: one vpmaddubsw
// is 32 int8 multiply-adds (u8 x s8 byte pairs), one 256-bit FMA is 8 fp32
// multiply-adds (a 512-bit one 16; measured where the CPU has AVX-512, with
// -1 in the JSON otherwise). The model benchmarks divide FLOPs per token counted the same
// way (one multiply-add per weight per token).
//
// Usage: roofline_probe [--threads N] [--bytes 1GiB] [--reps 7] [--json]
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "bench_args.h"
#include "kernels/isa.h"

namespace {

namespace po = boost::program_options;
using clock_type = std::chrono::steady_clock;

// Runs fn(thread_index) on n threads at once (released together); returns the wall time in seconds.
double run_parallel(int n, const std::function<void(int)>& fn) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < n; ++t) {
    ts.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      fn(t);
    });
  }
  while (ready.load() < n) {
  }
  const auto t0 = clock_type::now();
  go.store(true, std::memory_order_release);
  for (auto& th : ts) th.join();
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Sums [p, p + n) (n a multiple of 256 bytes) with 8 independent 256-bit accumulators.
__attribute__((target("avx2"))) uint64_t read_sum(const uint8_t* p, size_t n) {
  __m256i a[8];
  for (auto& x : a) x = _mm256_setzero_si256();
  for (size_t i = 0; i < n; i += 256) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      a[k] = _mm256_add_epi64(a[k], _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32 * k)));
    }
  }
  for (int k = 1; k < 8; ++k) a[0] = _mm256_add_epi64(a[0], a[k]);
  alignas(32) uint64_t out[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), a[0]);
  return out[0] + out[1] + out[2] + out[3];
}

// n_iter x k_maddubs_chains vpmaddubsw on independent chains; the byte operand changes every
// iteration. 10 chains, not 12: with 16 ymm registers (no AVX-512 here) 12 chains, u, step and
// a product spilled two accumulators to the stack.
constexpr int k_maddubs_chains = 10;
__attribute__((target("avx2"))) int64_t maddubs_loop(int64_t n_iter, int seed) {
  __m256i acc[k_maddubs_chains];
  for (int k = 0; k < k_maddubs_chains; ++k) acc[k] = _mm256_set1_epi16(static_cast<int16_t>(seed + k));
  __m256i u = _mm256_set1_epi8(static_cast<char>(3 + seed));
  const __m256i step = _mm256_set1_epi8(1);
  for (int64_t i = 0; i < n_iter; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < k_maddubs_chains; ++k) acc[k] = _mm256_add_epi16(acc[k], _mm256_maddubs_epi16(u, acc[k]));
    u = _mm256_add_epi8(u, step);
  }
  __m256i s = acc[0];
  for (int k = 1; k < k_maddubs_chains; ++k) s = _mm256_xor_si256(s, acc[k]);
  return _mm256_extract_epi64(s, 0);
}

// n_iter x 12 vpdpbusd (512-bit, AVX-512 VNNI: 64 u8 x s8 multiply-adds each,
// summed into int32) on 12 independent chains; the byte operand changes every
// iteration. This is the instruction spate's AVX-512 kernels use.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) int64_t dpbusd_loop(int64_t n_iter, int seed) {
  __m512i acc[12];
  for (int k = 0; k < 12; ++k) acc[k] = _mm512_set1_epi32(seed + k);
  __m512i u = _mm512_set1_epi8(static_cast<char>(3 + seed));
  const __m512i step = _mm512_set1_epi8(1);
  for (int64_t i = 0; i < n_iter; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < 12; ++k) acc[k] = _mm512_dpbusd_epi32(acc[k], u, acc[k]);
    u = _mm512_add_epi8(u, step);
  }
  __m512i s = acc[0];
  for (int k = 1; k < 12; ++k) s = _mm512_xor_si512(s, acc[k]);
  alignas(64) int64_t out[8];
  _mm512_store_si512(out, s);
  return out[0];
}

// The int8 ceiling of a quantized matmul's own instruction mix. vpdpbusd issues only on
// the two pipes that also run FP multiplies and FMAs (on a Zen 5 EPYC, 12 vpdpbusd plus
// 4 FMAs per iteration run at 0.75x of 12 alone; converts, logic, shifts and
// broadcast loads issue elsewhere and cost nothing up to the other two pipes' width).
// Per 32-element block, row and 16 columns the kernels issue 8 vpdpbusd, then turn the
// exact int32 sum into float: scale = d_w * d_a (one multiply), acc += cvt(isum) * scale
// (one FMA), and for the types with a min term (Q4_1, Q5_1, Q4_K, Q5_K) acc += m_w * s_a
// (a second FMA). NF = 2 or 3 such multiply-pipe ops per 8 vpdpbusd: the loop runs
// n_iter x (24 vpdpbusd on 12 chains + 3 x NF float ops on independent accumulators),
// with a d_w that changes every iteration so nothing is hoisted. Its rate bounds what
// any kernel of that type can reach: 8 / (8 + NF) of the vpdpbusd peak if the multiply
// pipes are the limit.
// Written in inline assembly: with intrinsics GCC saw that d_w is a broadcast scalar,
// multiplied it by d_a in scalar registers and hoisted the vector multiplies out, which
// measured a mix the kernels never run. Registers: zmm0-11 int32 chains, zmm12-14 the
// FMA accumulators, zmm15-17 the min-term ones, zmm18-23 temporaries, zmm24 the bytes,
// zmm25 d_w, zmm26-28 the three blocks' d_a, zmm29 s_a, zmm30-31 the per-iteration steps.
#define SPATE_DP(k) "vpdpbusd %%zmm24, %%zmm" #k ", %%zmm" #k "\n\t"
#define SPATE_DP2(k) SPATE_DP(k) SPATE_DP(k)
#define SPATE_SCALE(a, t, s, da, f) \
  "vcvtdq2ps %%zmm" #a ", %%zmm" #t "\n\tvmulps %%zmm" #da ", %%zmm25, %%zmm" #s "\n\tvfmadd231ps %%zmm" #s ", %%zmm" #t ", %%zmm" #f "\n\t"
#define SPATE_MIN(g) "vfmadd231ps %%zmm29, %%zmm25, %%zmm" #g "\n\t"
template <int NF>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) int64_t dpbusd_block_loop(int64_t n_iter, int seed) {
  static_assert(NF == 2 || NF == 3);
  alignas(64) int32_t ints[12][16];
  alignas(64) float floats[6][16];
  alignas(64) float consts[5][16];  // d_w, d_a x 3, s_a
  for (int k = 0; k < 12; ++k)
    for (int l = 0; l < 16; ++l) ints[k][l] = seed + k + l;
  for (int k = 0; k < 6; ++k)
    for (int l = 0; l < 16; ++l) floats[k][l] = 0.001f * static_cast<float>(seed + k);
  const float cv[5] = {0.5f, 0.25f, 0.375f, 0.625f, -0.125f};
  for (int k = 0; k < 5; ++k)
    for (int l = 0; l < 16; ++l) consts[k][l] = cv[k];
  asm volatile(
      "vmovdqa64 0(%[i]), %%zmm0\n\tvmovdqa64 64(%[i]), %%zmm1\n\tvmovdqa64 128(%[i]), %%zmm2\n\t"
      "vmovdqa64 192(%[i]), %%zmm3\n\tvmovdqa64 256(%[i]), %%zmm4\n\tvmovdqa64 320(%[i]), %%zmm5\n\t"
      "vmovdqa64 384(%[i]), %%zmm6\n\tvmovdqa64 448(%[i]), %%zmm7\n\tvmovdqa64 512(%[i]), %%zmm8\n\t"
      "vmovdqa64 576(%[i]), %%zmm9\n\tvmovdqa64 640(%[i]), %%zmm10\n\tvmovdqa64 704(%[i]), %%zmm11\n\t"
      "vmovaps 0(%[f]), %%zmm12\n\tvmovaps 64(%[f]), %%zmm13\n\tvmovaps 128(%[f]), %%zmm14\n\t"
      "vmovaps 192(%[f]), %%zmm15\n\tvmovaps 256(%[f]), %%zmm16\n\tvmovaps 320(%[f]), %%zmm17\n\t"
      "vmovaps 0(%[c]), %%zmm25\n\tvmovaps 64(%[c]), %%zmm26\n\tvmovaps 128(%[c]), %%zmm27\n\t"
      "vmovaps 192(%[c]), %%zmm28\n\tvmovaps 256(%[c]), %%zmm29\n\t"
      "vmovdqa64 0(%[i]), %%zmm24\n\tvpternlogd $0xff, %%zmm30, %%zmm30, %%zmm30\n\t"  // bytes; step -1
      "vmulps %%zmm29, %%zmm29, %%zmm31\n\tvmulps %%zmm31, %%zmm31, %%zmm31\n\t"       // d_w step 2^-12
      "1:\n\t"
      SPATE_DP2(0) SPATE_DP2(1) SPATE_DP2(2) SPATE_DP2(3) SPATE_DP2(4) SPATE_DP2(5)
      SPATE_DP2(6) SPATE_DP2(7) SPATE_DP2(8) SPATE_DP2(9) SPATE_DP2(10) SPATE_DP2(11)
      SPATE_SCALE(0, 18, 21, 26, 12) SPATE_SCALE(4, 19, 22, 27, 13) SPATE_SCALE(8, 20, 23, 28, 14)
      "cmpl $3, %[nf]\n\tjne 2f\n\t"
      SPATE_MIN(15) SPATE_MIN(16) SPATE_MIN(17)
      "2:\n\t"
      "vpaddb %%zmm30, %%zmm24, %%zmm24\n\tvaddps %%zmm31, %%zmm25, %%zmm25\n\t"
      "dec %[n]\n\tjnz 1b\n\t"
      "vmovdqa64 %%zmm0, 0(%[i])\n\tvmovdqa64 %%zmm5, 64(%[i])\n\tvmovdqa64 %%zmm11, 128(%[i])\n\t"
      "vmovaps %%zmm12, 0(%[f])\n\tvmovaps %%zmm13, 64(%[f])\n\tvmovaps %%zmm14, 128(%[f])\n\t"
      "vmovaps %%zmm15, 192(%[f])\n\tvmovaps %%zmm16, 256(%[f])\n\tvmovaps %%zmm17, 320(%[f])\n\t"
      : [n] "+r"(n_iter)
      : [i] "r"(&ints[0][0]), [f] "r"(&floats[0][0]), [c] "r"(&consts[0][0]), [nf] "r"(NF)
      : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22",
        "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31");
  int64_t out = int64_t{ints[0][0]} ^ ints[1][3] ^ ints[2][7];
  for (int k = 0; k < 6; ++k) out += static_cast<int64_t>(floats[k][0] * 1e-3f);
  return out;
}
#undef SPATE_DP
#undef SPATE_DP2
#undef SPATE_SCALE
#undef SPATE_MIN

// The same ceiling for the avx2 kernels (matmul_avx2.cpp, and the avx512 level's types
// without an avx512 kernel), with AVX2 only: ymm0-15, no AVX-512 register or instruction,
// so it runs on an AVX2-only CPU. Per 32-element block, row and 8 columns those kernels
// issue 8 vpmaddubsw (u8 x s8 byte pairs into int16 pairs), 7 vpaddw folding them into
// one int16 partial sum, one vpmaddwd by the int16 multipliers (1, or the sub-block
// scales) into int32, then the float part of the avx512 mix: vcvtdq2ps, NF = 2 or 3
// multiply-pipe float ops (scale = d_w * d_a, acc += cvt(isum) * scale, and for the
// types with a min term acc += m_w * s_a). The loop runs n_iter x 3 such blocks on
// independent registers; the bytes and d_w change every iteration, and d_a / s_a come
// from memory, so nothing is hoisted. Decoding the weights (nibble masks and shifts,
// shared by the rows of a tile) is not counted: this is the mix every kernel of these
// formats runs after decoding. Registers: ymm0-2 the FMA accumulators, ymm3-5 the
// min-term ones, ymm6 the weight bytes, ymm7 the activation bytes, ymm8-10 the blocks'
// partial sums, ymm11-12 products, ymm13 the int16 ones, ymm14 d_w, ymm15 the scale.
#define SPATE_MB(d) "vpmaddubsw %%ymm7, %%ymm6, %%ymm" #d "\n\t"
#define SPATE_MBADD(t, s) SPATE_MB(t) "vpaddw %%ymm" #t ", %%ymm" #s ", %%ymm" #s "\n\t"
#define SPATE_BLOCK(s, a, m)                                                                                \
  SPATE_MB(s) SPATE_MBADD(11, s) SPATE_MBADD(12, s) SPATE_MBADD(11, s) SPATE_MBADD(12, s) SPATE_MBADD(11, s) \
  SPATE_MBADD(12, s) SPATE_MBADD(11, s)                                                                    \
  "vpmaddwd %%ymm13, %%ymm" #s ", %%ymm" #s "\n\tvcvtdq2ps %%ymm" #s ", %%ymm" #s "\n\t"                  \
  "vmulps 32(%[c]), %%ymm14, %%ymm15\n\tvfmadd231ps %%ymm15, %%ymm" #s ", %%ymm" #a "\n\t"               \
  "cmpl $3, %[nf]\n\tjne 3f\n\tvfmadd231ps 64(%[c]), %%ymm14, %%ymm" #m "\n\t3:\n\t"
template <int NF>
__attribute__((target("avx2,fma"))) int64_t maddubs_block_loop(int64_t n_iter, int seed) {
  static_assert(NF == 2 || NF == 3);
  alignas(32) float floats[6][8];
  alignas(32) float consts[5][8];  // d_w, d_a, s_a, the d_w step, bytes step (as int8 ones)
  alignas(32) int8_t bytes[32];
  for (int k = 0; k < 6; ++k)
    for (int l = 0; l < 8; ++l) floats[k][l] = 0.001f * static_cast<float>(seed + k);
  const float cv[4] = {0.5f, 0.375f, -0.125f, 1.0f / 4096};
  for (int k = 0; k < 4; ++k)
    for (int l = 0; l < 8; ++l) consts[k][l] = cv[k];
  std::memset(&consts[4][0], 1, sizeof consts[4]);
  for (int l = 0; l < 32; ++l) bytes[l] = static_cast<int8_t>(seed + 3 * l);
  asm volatile(
      "vmovaps 0(%[f]), %%ymm0\n\tvmovaps 32(%[f]), %%ymm1\n\tvmovaps 64(%[f]), %%ymm2\n\t"
      "vmovaps 96(%[f]), %%ymm3\n\tvmovaps 128(%[f]), %%ymm4\n\tvmovaps 160(%[f]), %%ymm5\n\t"
      "vmovdqa 0(%[b]), %%ymm6\n\tvmovdqa 0(%[b]), %%ymm7\n\tvmovaps 0(%[c]), %%ymm14\n\t"
      "vpcmpeqw %%ymm13, %%ymm13, %%ymm13\n\tvpsrlw $15, %%ymm13, %%ymm13\n\t"  // int16 ones
      "1:\n\t"
      SPATE_BLOCK(8, 0, 3) SPATE_BLOCK(9, 1, 4) SPATE_BLOCK(10, 2, 5)
      "vpaddb 128(%[c]), %%ymm7, %%ymm7\n\tvaddps 96(%[c]), %%ymm14, %%ymm14\n\t"
      "dec %[n]\n\tjnz 1b\n\t"
      "vmovaps %%ymm0, 0(%[f])\n\tvmovaps %%ymm1, 32(%[f])\n\tvmovaps %%ymm2, 64(%[f])\n\t"
      "vmovaps %%ymm3, 96(%[f])\n\tvmovaps %%ymm4, 128(%[f])\n\tvmovaps %%ymm5, 160(%[f])\n\t"
      "vzeroupper\n\t"
      : [n] "+r"(n_iter)
      : [f] "r"(&floats[0][0]), [c] "r"(&consts[0][0]), [b] "r"(bytes), [nf] "r"(NF)
      : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
  int64_t out = 0;
  for (int k = 0; k < 6; ++k) out += static_cast<int64_t>(floats[k][0] * 1e-3f);
  return out;
}
#undef SPATE_MB
#undef SPATE_MBADD
#undef SPATE_BLOCK

// n_iter x 12 FMAs on 12 independent chains; the multiplier changes every iteration.
__attribute__((target("avx2,fma"))) float fma_loop(int64_t n_iter, int seed) {
  __m256 acc[12];
  for (int k = 0; k < 12; ++k) acc[k] = _mm256_set1_ps(0.001f * static_cast<float>(seed + k));
  __m256 m = _mm256_set1_ps(0.999f);
  const __m256 c = _mm256_set1_ps(1e-3f), dm = _mm256_set1_ps(1e-9f);
  for (int64_t i = 0; i < n_iter; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < 12; ++k) acc[k] = _mm256_fmadd_ps(acc[k], m, c);
    m = _mm256_add_ps(m, dm);
  }
  __m256 s = acc[0];
  for (int k = 1; k < 12; ++k) s = _mm256_add_ps(s, acc[k]);
  return _mm256_cvtss_f32(s);
}

// The same with 512-bit FMAs (16 fp32 multiply-adds each), the width of
// spate's AVX-512 attention kernel; on Zen 4 they run faster than two 256-bit ones.
__attribute__((target("avx512f"))) float fma512_loop(int64_t n_iter, int seed) {
  __m512 acc[12];
  for (int k = 0; k < 12; ++k) acc[k] = _mm512_set1_ps(0.001f * static_cast<float>(seed + k));
  __m512 m = _mm512_set1_ps(0.999f);
  const __m512 c = _mm512_set1_ps(1e-3f), dm = _mm512_set1_ps(1e-9f);
  for (int64_t i = 0; i < n_iter; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < 12; ++k) acc[k] = _mm512_fmadd_ps(acc[k], m, c);
    m = _mm512_add_ps(m, dm);
  }
  __m512 s = acc[0];
  for (int k = 1; k < 12; ++k) s = _mm512_add_ps(s, acc[k]);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  return out[0] + out[15];
}

}  // namespace

int main(int argc, char** argv) {
  int n_threads = 2, reps = 7;
  size_t bytes = size_t{1} << 30;
  bool as_json = false, small_pages = false;
  po::options_description desc("roofline_probe");
  desc.add_options()("threads", po::value(&n_threads)->default_value(2), "worker threads")(
      "bytes", po::value(&bytes)->default_value(bytes), "bytes of the bandwidth buffer")(
      "reps", po::value(&reps)->default_value(7), "passes per figure (median)")("json", po::bool_switch(&as_json),
                                                                               "one JSON line instead of text")(
      "small-pages", po::bool_switch(&small_pages), "no MADV_HUGEPAGE on the bandwidth buffer (4 KiB pages)")(
      "help,h", "show this help");
  po::variables_map vm;
  if (const auto code = spate::perf::parse_args("roofline_probe", argc, argv, desc, vm)) return *code;
  if (!spate::kernels::cpu_supports(spate::kernels::isa_level::avx2) || n_threads < 1 || reps < 1) {
    std::fprintf(stderr, "roofline_probe: needs AVX2+FMA, --threads >= 1 and --reps >= 1\n");
    return 2;
  }
  bytes = bytes / (256 * static_cast<size_t>(n_threads)) * 256 * static_cast<size_t>(n_threads);
  const size_t huge = size_t{2} << 20;  // aligned_alloc wants a size that is a multiple of the alignment
  auto* buf = static_cast<uint8_t*>(std::aligned_alloc(huge, (bytes + huge - 1) / huge * huge));
  if (buf == nullptr) {
    std::fprintf(stderr, "roofline_probe: cannot allocate %zu bytes\n", bytes);
    return 2;
  }
  if (!small_pages) ::madvise(buf, bytes, MADV_HUGEPAGE);  // advice: 4 KiB pages if refused
  const size_t slice = bytes / static_cast<size_t>(n_threads);
  // First touch by the thread that reads the slice; values vary so nothing folds.
  run_parallel(n_threads, [&](int t) {
    for (size_t i = 0; i < slice; ++i) buf[t * slice + i] = static_cast<uint8_t>(i * 31 + t);
  });
  std::vector<uint64_t> sink(static_cast<size_t>(n_threads));
  const bool has_vnni = spate::kernels::cpu_supports(spate::kernels::isa_level::avx512);
  std::vector<double> bw, i8, vnni, f32, f32w, mix2, mix3, amix2, amix3;
  const int64_t n_iter = 20'000'000;
  for (int r = 0; r < reps; ++r) {
    const double s = run_parallel(n_threads, [&](int t) { sink[static_cast<size_t>(t)] += read_sum(buf + t * slice, slice); });
    bw.push_back(static_cast<double>(bytes) / s / 1e9);
    const double si = run_parallel(n_threads, [&](int t) { sink[static_cast<size_t>(t)] += maddubs_loop(n_iter, t + r); });
    i8.push_back(static_cast<double>(n_iter) * k_maddubs_chains * 32 * n_threads / si / 1e9);
    const double a2 = run_parallel(n_threads, [&](int t) { sink[static_cast<size_t>(t)] += maddubs_block_loop<2>(n_iter / 4, t + r); });
    amix2.push_back(static_cast<double>(n_iter / 4) * 24 * 32 * n_threads / a2 / 1e9);
    const double a3 = run_parallel(n_threads, [&](int t) { sink[static_cast<size_t>(t)] += maddubs_block_loop<3>(n_iter / 4, t + r); });
    amix3.push_back(static_cast<double>(n_iter / 4) * 24 * 32 * n_threads / a3 / 1e9);
    if (has_vnni) {
      const double sv = run_parallel(n_threads, [&](int t) { sink[static_cast<size_t>(t)] += dpbusd_loop(n_iter, t + r); });
      vnni.push_back(static_cast<double>(n_iter) * 12 * 64 * n_threads / sv / 1e9);
      const double s2 = run_parallel(n_threads, [&](int t) { sink[static_cast<size_t>(t)] += dpbusd_block_loop<2>(n_iter / 2, t + r); });
      mix2.push_back(static_cast<double>(n_iter / 2) * 24 * 64 * n_threads / s2 / 1e9);
      const double s3 = run_parallel(n_threads, [&](int t) { sink[static_cast<size_t>(t)] += dpbusd_block_loop<3>(n_iter / 2, t + r); });
      mix3.push_back(static_cast<double>(n_iter / 2) * 24 * 64 * n_threads / s3 / 1e9);
    }
    const double sf = run_parallel(n_threads, [&](int t) { sink[static_cast<size_t>(t)] += static_cast<uint64_t>(fma_loop(n_iter, t + r)); });
    f32.push_back(static_cast<double>(n_iter) * 12 * 8 * n_threads / sf / 1e9);
    if (has_vnni) {
      const double sw = run_parallel(n_threads, [&](int t) { sink[static_cast<size_t>(t)] += static_cast<uint64_t>(fma512_loop(n_iter, t + r)); });
      f32w.push_back(static_cast<double>(n_iter) * 12 * 16 * n_threads / sw / 1e9);
    }
  }
  std::free(buf);
  uint64_t checksum = 0;
  for (auto v : sink) checksum ^= v;
  // -1 in JSON (and "n/a" in text) when the CPU lacks AVX-512 VNNI.
  const double vnni_gmac_s = has_vnni ? median(vnni) : -1.0;
  const double fma512_gmac_s = has_vnni ? median(f32w) : -1.0;
  const double mix2_gmac_s = has_vnni ? median(mix2) : -1.0, mix3_gmac_s = has_vnni ? median(mix3) : -1.0;
  if (as_json) {
    std::printf("{\"threads\":%d,\"read_gb_s\":%.2f,\"int8_maddubs_gmac_s\":%.1f,\"int8_vnni_gmac_s\":%.1f,"
                "\"int8_vnni_block2_gmac_s\":%.1f,\"int8_vnni_block3_gmac_s\":%.1f,"
                "\"int8_maddubs_block2_gmac_s\":%.1f,\"int8_maddubs_block3_gmac_s\":%.1f,"
                "\"fp32_fma_gmac_s\":%.1f,\"fp32_fma512_gmac_s\":%.1f,\"reps\":%d,\"checksum\":%llu}\n",
                n_threads, median(bw), median(i8), vnni_gmac_s, mix2_gmac_s, mix3_gmac_s, median(amix2), median(amix3),
                median(f32), fma512_gmac_s, reps,
                static_cast<unsigned long long>(checksum & 0xffff));
  } else {
    std::printf("threads %d, median of %d passes\n", n_threads, reps);
    std::printf("  read bandwidth      %7.2f GB/s   (%zu MiB buffer)\n", median(bw), bytes >> 20);
    std::printf("  int8 vpmaddubsw     %7.1f GMAC/s (u8 x s8 multiply-adds, 256-bit)\n", median(i8));
    std::printf("    + 2 fp ops / 8    %7.1f GMAC/s (%.0f%%: the avx2 block mix of Q8_0, Q4_0, Q5_0, IQ4_NL)\n",
                median(amix2), 100 * median(amix2) / median(i8));
    std::printf("    + 3 fp ops / 8    %7.1f GMAC/s (%.0f%%: with a min term, Q4_1, Q5_1, Q4_K, Q5_K)\n", median(amix3),
                100 * median(amix3) / median(i8));
    if (has_vnni) std::printf("  int8 vpdpbusd       %7.1f GMAC/s (u8 x s8 multiply-adds, 512-bit VNNI)\n", vnni_gmac_s);
    else std::printf("  int8 vpdpbusd           n/a (no AVX-512 VNNI)\n");
    if (has_vnni) {
      std::printf("    + 2 fp ops / 8    %7.1f GMAC/s (%.0f%%: the block mix of Q8_0, Q4_0, Q5_0, IQ4_NL)\n", mix2_gmac_s,
                  100 * mix2_gmac_s / vnni_gmac_s);
      std::printf("    + 3 fp ops / 8    %7.1f GMAC/s (%.0f%%: with a min term, Q4_1, Q5_1, Q4_K, Q5_K)\n", mix3_gmac_s,
                  100 * mix3_gmac_s / vnni_gmac_s);
    }
    std::printf("  fp32 FMA            %7.1f GMAC/s (%.1f GFLOP/s, 256-bit)\n", median(f32), 2 * median(f32));
    if (has_vnni) std::printf("  fp32 FMA 512-bit    %7.1f GMAC/s\n", fma512_gmac_s);
  }
  return 0;
}
