// What the instruction mixes of spate's AVX-512 kernels cost on this CPU, one
// thread (perf/README.md, "Two pairs per tile"). Each mix runs 8 (FMA: 12) independent
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

struct mix {
  const char* name;
  double per_iter;  // main instructions per loop iteration
  double (*run)(int64_t);
};

template <int B>
double run_dpbusd(int64_t n) {
  volatile int64_t sink = 0;
  const double s = seconds([&] { sink = sink + dpbusd_mix<B>(n); });
  return s;
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
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "port_probe: %s\n", e.what());
    return 2;
  }
  if (vm.count("help")) {
    std::printf("Usage: port_probe [--reps N]\n");
    return 0;
  }
  if (!spate::kernels::cpu_supports(spate::kernels::isa_level::avx512) || reps < 1) {
    std::fprintf(stderr, "port_probe: needs AVX-512 VNNI and --reps >= 1\n");
    return 2;
  }
  for (size_t i = 0; i < sizeof(g_data); ++i) g_data[i] = static_cast<uint8_t>(i % 2 ? 0x3c : i * 7);  // halves ~1
  const mix mixes[] = {{"dpbusd", k_chains, run_dpbusd<0>},       {"dpbusd+bcast", k_chains, run_dpbusd<1>},
                       {"dpbusd+bcast/2", 2 * k_chains, run_dpbusd<2>}, {"fma", k_fma_chains, run_fma<0>},
                       {"fma+cvtph", k_fma_chains, run_fma<1>}, {"fma+cvtph/3", k_fma_chains, run_fma<3>}};
  double unit_rate[2] = {0, 0};  // register-only rate of vpdpbusd and of vfmadd, G/s
  std::printf("%-16s %10s %8s\n", "mix", "G/s", "ratio");
  for (size_t m = 0; m < std::size(mixes); ++m) {
    std::vector<double> rate;
    mixes[m].run(k_iters / 100);  // warm up (clocks, page faults)
    for (int r = 0; r < reps; ++r) rate.push_back(mixes[m].per_iter * k_iters / mixes[m].run(k_iters) / 1e9);
    std::sort(rate.begin(), rate.end());
    const double med = rate[rate.size() / 2];
    const int unit = m < 3 ? 0 : 1;
    if (m == 0 || m == 3) unit_rate[unit] = med;
    std::printf("%-16s %10.2f %8.2f\n", mixes[m].name, med, med / unit_rate[unit]);
  }
  return 0;
}
