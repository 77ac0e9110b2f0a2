// What the instruction mixes of spate's AVX-512 kernels cost on this CPU, one
// thread (docs/journal/performance.md, "Two pairs per tile"). Each mix runs 8 (FMA: 12) independent
// accumulator chains in an unrolled loop over L1-resident data, so neither
// latency nor memory limits it; the figure is the rate of its main instruction
// (vpdpbusd or vfmadd, 512-bit) in G/s, and its ratio to the register-only
// rate of that instruction:
//   dpbusd                      register operands only (the unit's rate)
//   dpbusd+bcast                one 4-byte broadcast load per vpdpbusd (the
//                               8-row pair tile: one activation broadcast per
//                               16 columns)
//   dpbusd+bcast/2              one broadcast per two vpdpbusd (two pairs per
//                               tile: one broadcast per 32 columns)
//   dpbusd12                    12 register-only vpdpbusd chains in inline assembly
//   dpbusd12+fma/3, +mul/3,     the same with 4 FMAs, FP multiplies, vpmulld,
//   +mullo/3, +and/3, +cvt/3    vpandd or vcvtdq2ps on other registers: which
//                               share vpdpbusd's pipes (ratios to dpbusd12)
//   fma                         register operands only
//   fma+cvtph                   one f16 load-and-convert (vcvtph2ps) per FMA
//                               (attention's K or V row feeding one head)
//   fma+cvtph/3                 one per three FMAs (a K row feeding the 3 heads
//                               of a GQA group)
// A ratio well below 1 means the added instructions compete for the unit's
// issue slots (or the load ports), not that the unit got slower.
//
// Usage: port_probe [--reps 5]   (needs AVX-512 VNNI; exits 2 without it)
// GCC 12's 512-bit intrinsics pass a self-initialised undefined vector as the unused merge
// source of their masked builtins (GCC PR 105593); the values are never read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "bench_args.h"
#include <immintrin.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernels/isa.h"

namespace {

namespace po = boost::program_options;

constexpr int k_chains = 8;      // vpdpbusd chains
constexpr int k_fma_chains = 12;  // FMA chains (a multiple of 3)
constexpr int64_t k_iters = 20'000'000;
// Operands in L1: 64 distinct rows of 64 bytes; the row changes every iteration.
alignas(64) uint8_t g_data[64 * 64];

template <class F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// BcastEvery: 0 = register operands; 1 = a broadcast load per vpdpbusd; 2 = per two.
template <int BcastEvery>
__attribute__((target("avx512f,avx512bw,avx512vnni"), noinline)) int64_t dpbusd_mix(int64_t n) {
  __m512i acc[k_chains], acc2[k_chains];
  for (int k = 0; k < k_chains; ++k) acc[k] = acc2[k] = _mm512_set1_epi32(k);
  __m512i w = _mm512_loadu_si512(g_data), w2 = _mm512_loadu_si512(g_data + 64), x = _mm512_set1_epi8(3);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* row = g_data + (i & 63) * 64;
    asm volatile("" : "+r"(row), "+v"(w), "+v"(x));
#pragma GCC unroll 8
    for (int k = 0; k < k_chains; ++k) {
      if constexpr (BcastEvery == 0) {
        acc[k] = _mm512_dpbusd_epi32(acc[k], w, x);
      } else {
        int32_t v;
        __builtin_memcpy(&v, row + 4 * k, 4);
        const __m512i b = _mm512_set1_epi32(v);
        acc[k] = _mm512_dpbusd_epi32(acc[k], w, b);
        if constexpr (BcastEvery == 2) acc2[k] = _mm512_dpbusd_epi32(acc2[k], w2, b);
      }
    }
  }
  __m512i s = acc[0];
  for (int k = 1; k < k_chains; ++k) s = _mm512_add_epi32(s, _mm512_add_epi32(acc[k], acc2[k]));
  return _mm512_reduce_add_epi32(s);
}

// CvtEvery: 0 = register operands; 1 = a vcvtph2ps of 16 halves per FMA; 3 = per three.
template <int CvtEvery>
__attribute__((target("avx512f,f16c"), noinline)) float fma_mix(int64_t n) {
  __m512 acc[k_fma_chains];
  for (int k = 0; k < k_fma_chains; ++k) acc[k] = _mm512_set1_ps(static_cast<float>(k));
  __m512 q = _mm512_set1_ps(1.0f), c = _mm512_set1_ps(0.5f);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* row = g_data + (i & 7) * 384;  // 12 x 32 bytes of halves
    asm volatile("" : "+r"(row), "+v"(q), "+v"(c));
    constexpr int per = CvtEvery == 0 ? k_fma_chains : CvtEvery;  // FMAs per converted operand
#pragma GCC unroll 12
    for (int g = 0; g < k_fma_chains / per; ++g) {
      const __m512 v =
          CvtEvery == 0 ? c : _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * g)));
#pragma GCC unroll 12
      for (int j = 0; j < per; ++j) acc[g * per + j] = _mm512_fmadd_ps(q, v, acc[g * per + j]);
    }
  }
  __m512 s = acc[0];
  for (int k = 1; k < k_fma_chains; ++k) s = _mm512_add_ps(s, acc[k]);
  return _mm512_reduce_add_ps(s);
}

// 12 vpdpbusd on independent chains plus 4 other instructions on independent registers
// per iteration (inline assembly, so nothing is folded or hoisted): whether that
// instruction shares vpdpbusd's pipes. The float work of a quantized block (a multiply,
// one or two FMAs) and K-quant integer scaling (vpmulld) do on a Zen 5; converts and
// logic do not. roofline_probe's block mixes build on this.
#define SPATE_DP12                                                                                              \
  "vpdpbusd %%zmm30, %%zmm31, %%zmm0\n\tvpdpbusd %%zmm30, %%zmm31, %%zmm1\n\tvpdpbusd %%zmm30, %%zmm31, %%zmm2\n\t"     \
  "vpdpbusd %%zmm30, %%zmm31, %%zmm3\n\tvpdpbusd %%zmm30, %%zmm31, %%zmm4\n\tvpdpbusd %%zmm30, %%zmm31, %%zmm5\n\t"     \
  "vpdpbusd %%zmm30, %%zmm31, %%zmm6\n\tvpdpbusd %%zmm30, %%zmm31, %%zmm7\n\tvpdpbusd %%zmm30, %%zmm31, %%zmm8\n\t"     \
  "vpdpbusd %%zmm30, %%zmm31, %%zmm9\n\tvpdpbusd %%zmm30, %%zmm31, %%zmm10\n\tvpdpbusd %%zmm30, %%zmm31, %%zmm11\n\t"
#define SPATE_X4(op) op " %%zmm28, %%zmm29, %%zmm12\n\t" op " %%zmm28, %%zmm29, %%zmm13\n\t" \
                     op " %%zmm28, %%zmm29, %%zmm14\n\t" op " %%zmm28, %%zmm29, %%zmm15\n\t"
#define SPATE_DP_LOOP(extra)                                                                            \
  asm volatile("vpxord %%zmm30, %%zmm30, %%zmm30\n\tvpxord %%zmm31, %%zmm31, %%zmm31\n\t"                 \
               "vpxord %%zmm28, %%zmm28, %%zmm28\n\tvpxord %%zmm29, %%zmm29, %%zmm29\n\t1:\n\t" SPATE_DP12 extra \
               "dec %0\n\tjnz 1b"                                                                      \
               : "+r"(n)                                                                                \
               :                                                                                        \
               : "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", \
                 "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm28", "xmm29", "xmm30", "xmm31")
template <int Kind>
__attribute__((target("avx512f,avx512bw,avx512vnni"), noinline)) int64_t dpbusd_with(int64_t n) {
  if constexpr (Kind == 0) SPATE_DP_LOOP(SPATE_X4("vfmadd231ps"));
  else if constexpr (Kind == 1) SPATE_DP_LOOP(SPATE_X4("vmulps"));
  else if constexpr (Kind == 2) SPATE_DP_LOOP(SPATE_X4("vpmulld"));
  else if constexpr (Kind == 3) SPATE_DP_LOOP(SPATE_X4("vpandd"));
  else if constexpr (Kind == 4) SPATE_DP_LOOP("");
  else SPATE_DP_LOOP("vcvtdq2ps %%zmm29, %%zmm12\n\tvcvtdq2ps %%zmm29, %%zmm13\n\t"
                     "vcvtdq2ps %%zmm29, %%zmm14\n\tvcvtdq2ps %%zmm29, %%zmm15\n\t");
  return n;
}
#undef SPATE_DP12
#undef SPATE_X4
#undef SPATE_DP_LOOP

struct mix {
  const char* name;
  double per_iter;  // main instructions per loop iteration
  double (*run)(int64_t);
  int unit;  // the mix whose rate the ratio divides by (itself: a unit)
};

template <int B>
double run_dpbusd(int64_t n) {
  volatile int64_t sink = 0;
  const double s = seconds([&] { sink = sink + dpbusd_mix<B>(n); });
  return s;
}
template <int K>
double run_dpbusd_with(int64_t n) {
  volatile int64_t sink = 0;
  return seconds([&] { sink = sink + dpbusd_with<K>(n); });
}
template <int C>
double run_fma(int64_t n) {
  volatile float sink = 0;
  const double s = seconds([&] { sink = sink + fma_mix<C>(n); });
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  po::options_description desc("port_probe");
  desc.add_options()("reps", po::value(&reps)->default_value(5), "passes per figure (median)")("help,h", "show this help");
  po::variables_map vm;
  if (const auto code = spate::perf::parse_args("port_probe", argc, argv, desc, vm)) return *code;
  if (!spate::kernels::cpu_supports(spate::kernels::isa_level::avx512) || reps < 1) {
    std::fprintf(stderr, "port_probe: needs AVX-512 VNNI and --reps >= 1\n");
    return 2;
  }
  for (size_t i = 0; i < sizeof(g_data); ++i) g_data[i] = static_cast<uint8_t>(i % 2 ? 0x3c : i * 7);  // halves ~1
  const mix mixes[] = {{"dpbusd", k_chains, run_dpbusd<0>, 0},
                       {"dpbusd+bcast", k_chains, run_dpbusd<1>, 0},
                       {"dpbusd+bcast/2", 2 * k_chains, run_dpbusd<2>, 0},
                       {"dpbusd12", 12, run_dpbusd_with<4>, 3},
                       {"dpbusd12+fma/3", 12, run_dpbusd_with<0>, 3},
                       {"dpbusd12+mul/3", 12, run_dpbusd_with<1>, 3},
                       {"dpbusd12+mullo/3", 12, run_dpbusd_with<2>, 3},
                       {"dpbusd12+and/3", 12, run_dpbusd_with<3>, 3},
                       {"dpbusd12+cvt/3", 12, run_dpbusd_with<5>, 3},
                       {"fma", k_fma_chains, run_fma<0>, 9},
                       {"fma+cvtph", k_fma_chains, run_fma<1>, 9},
                       {"fma+cvtph/3", k_fma_chains, run_fma<3>, 9}};
  std::vector<double> med_of(std::size(mixes), 0.0);
  std::printf("%-18s %10s %8s\n", "mix", "G/s", "ratio");
  for (size_t m = 0; m < std::size(mixes); ++m) {
    std::vector<double> rate;
    mixes[m].run(k_iters / 100);  // warm up (clocks, page faults)
    for (int r = 0; r < reps; ++r) rate.push_back(mixes[m].per_iter * k_iters / mixes[m].run(k_iters) / 1e9);
    std::sort(rate.begin(), rate.end());
    const double med = rate[rate.size() / 2];
    med_of[m] = med;
    std::printf("%-18s %10.2f %8.2f\n", mixes[m].name, med, med / med_of[static_cast<size_t>(mixes[m].unit)]);
  }
  return 0;
}
