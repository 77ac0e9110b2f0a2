// How fast one or more threads stream weight records from memory in the two record
// orders of the matmul kernels (kernels/matmul_internal.h), with a single-row
// kernel's work per 32-block in between (issue 14: where batch-1 decode's time goes).
//
// A record is one 8-column group of a Q4_0 matrix with n_in = 2048: 64 blocks of
// 128 bytes of quants and 16 bytes of fp16 scales (9216 bytes). The buffer holds
// --bytes of records (far larger than the last-level cache), split evenly between
// the threads. Per block, the work is the avx2 kernel's for one row: four 32-byte
// loads, eight nibble unpacks, eight maddubs + madd, the scale load and two FMAs.
//
//   regions : the region layout (all quants of a record, then all its scales), with
//             the kernels' software prefetch (the record 3 ahead, into L2, spread over
//             the blocks) -- the avx2 level's order;
//   regions-nopf : the same without software prefetch;
//   inline  : block by block (quants, then that block's scales), no software
//             prefetch -- the avx512 level's order for a single row;
//   inline-pf : inline with the same software prefetch.
//
// The patterns alternate within each rep, so all see the same minutes of a shared
// machine; each figure is the median over --reps of GB/s summed over the threads.
//
// Usage: read_patterns [--threads 1] [--bytes-mib 256] [--reps 7] [--json]
#include "bench_args.h"
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr int64_t k_blocks = 64, k_qs_bytes = 128, k_d_bytes = 16;
constexpr int64_t k_record_bytes = k_blocks * (k_qs_bytes + k_d_bytes);
constexpr int64_t k_prefetch_records = 3;

enum class pattern { regions, regions_nopf, in_blocks, in_blocks_pf };
constexpr const char* k_names[] = {"regions", "regions-nopf", "inline", "inline-pf"};

alignas(64) int8_t g_act[k_blocks * 32];

// One block of one activation row: the avx2 kernel's integer and float steps.
__attribute__((target("avx2,fma,f16c"), always_inline)) inline __m256 block_work(const uint8_t* qs,
                                                                                 const uint8_t* d, int64_t b,
                                                                                 __m256 acc) {
  const __m256i low = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
  __m256i s0 = _mm256_setzero_si256(), s1 = s0;
  for (int p = 0; p < 4; ++p) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * p));
    int32_t a_lo, a_hi;
    std::memcpy(&a_lo, g_act + 32 * b + 4 * p, 4);
    std::memcpy(&a_hi, g_act + 32 * b + 16 + 4 * p, 4);
    s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(v, low), _mm256_set1_epi32(a_lo)), ones));
    s1 = _mm256_add_epi32(
        s1, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), low), _mm256_set1_epi32(a_hi)), ones));
  }
  const __m256 vd = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d)));
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), _mm256_mul_ps(vd, _mm256_set1_ps(0.5f)), acc);
  return _mm256_fmadd_ps(vd, _mm256_set1_ps(-4.0f), acc);
}

// Streams records [0, n) at base in pattern p; returns a value that depends on every byte.
__attribute__((target("avx2,fma,f16c"))) float stream(const uint8_t* base, int64_t n, pattern p) {
  const bool in_blocks = p == pattern::in_blocks || p == pattern::in_blocks_pf;
  const bool prefetch = p == pattern::regions || p == pattern::in_blocks_pf;
  const int64_t lines_per_block = (k_record_bytes / 64 + k_blocks - 1) / k_blocks;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* rec = base + r * k_record_bytes;
    const uint8_t* pf = prefetch && r + k_prefetch_records < n ? rec + k_prefetch_records * k_record_bytes : nullptr;
    for (int64_t b = 0; b < k_blocks; ++b) {
      if (pf != nullptr)
        for (int64_t i = 0; i < lines_per_block; ++i) __builtin_prefetch(pf + (b * lines_per_block + i) * 64, 0, 2);
      if (in_blocks) {
        const uint8_t* blk = rec + b * (k_qs_bytes + k_d_bytes);
        acc = block_work(blk, blk + k_qs_bytes, b, acc);
      } else {
        acc = block_work(rec + b * k_qs_bytes, rec + k_blocks * k_qs_bytes + b * k_d_bytes, b, acc);
      }
    }
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  return lanes[0] + lanes[7];
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  int threads = 1, reps = 7;
  int64_t mib = 256;
  bool json = false;
  po::options_description desc("read_patterns");
  desc.add_options()("threads", po::value(&threads))("bytes-mib", po::value(&mib))("reps", po::value(&reps))(
      "json", po::bool_switch(&json));
  po::variables_map vm;
  if (const auto code = spate::perf::parse_args("read_patterns", argc, argv, desc, vm)) return *code;
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || threads < 1 || reps < 1 || mib < 16) {
    std::fprintf(stderr, "read_patterns: needs AVX2+FMA, --threads >= 1, --reps >= 1, --bytes-mib >= 16\n");
    return 2;
  }
  const int64_t per_thread = mib * (int64_t{1} << 20) / k_record_bytes / threads;
  const size_t bytes = size_t(per_thread * threads * k_record_bytes), huge = size_t{2} << 20;
  auto* buf = static_cast<uint8_t*>(std::aligned_alloc(huge, (bytes + huge - 1) / huge * huge));
  if (buf == nullptr) return 1;
  ::madvise(buf, bytes, MADV_HUGEPAGE);  // as the packed weights (advice only)
  for (size_t i = 0; i < bytes; ++i) buf[i] = uint8_t(i * 131 + 7);
  for (int i = 0; i < k_blocks * 32; ++i) g_act[i] = int8_t(i % 13 - 6);

  std::vector<double> gbs[4];
  float sink = 0;
  for (int rep = 0; rep <= reps; ++rep) {  // rep 0 warms up
    for (int p = 0; p < 4; ++p) {
      std::vector<std::thread> pool;
      std::vector<float> out(static_cast<size_t>(threads), 0.0f);
      const auto t0 = std::chrono::steady_clock::now();
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] { out[size_t(t)] = stream(buf + t * per_thread * k_record_bytes, per_thread, pattern(p)); });
      for (auto& th : pool) th.join();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      for (float v : out) sink += v;
      if (rep > 0) gbs[p].push_back(double(bytes) / s / 1e9);
    }
  }
  std::free(buf);
  double med[4];
  for (int p = 0; p < 4; ++p) {
    std::sort(gbs[p].begin(), gbs[p].end());
    med[p] = gbs[p][gbs[p].size() / 2];
  }
  if (json) {
    std::printf("{\"threads\":%d,\"reps\":%d", threads, reps);
    for (int p = 0; p < 4; ++p) std::printf(",\"%s_gb_s\":%.2f", k_names[p], med[p]);
    std::printf(",\"checksum\":%.6g}\n", double(sink));
  } else {
    for (int p = 0; p < 4; ++p) std::printf("%-13s %6.2f GB/s\n", k_names[p], med[p]);
    std::printf("(%d thread(s), median of %d reps; checksum %.6g)\n", threads, reps, double(sink));
  }
  return 0;
}
