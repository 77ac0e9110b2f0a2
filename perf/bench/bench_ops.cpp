// Micro-benchmarks for kernels/ops.h: attention over a paged f16/f32 KV cache
// and rms_norm, for the scalar reference, the AVX2 table and the avx512 level (its own attention);
// and for kernels/gdn.h: the gated delta rule (recurrent and chunked) and the short convolution.
//   ./bench_ops --benchmark_filter=attention
//   ./bench_ops --benchmark_filter='delta_rule|short_conv'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/fp16.h"
#include "kernels/gdn.h"
#include "kernels/isa.h"
#include "kernels/ops.h"

namespace {

using namespace spate::kernels;

bool usable(isa_level l, benchmark::State& state) {
  if (!cpu_supports(l)) {
    state.SkipWithError((std::string("CPU lacks ") + isa_name(l)).c_str());
    return false;
  }
  return true;
}

// args: isa (0 scalar, 1 avx2, 2 avx512), kv dtype ("f32kv", named so before the quantized ones:
// 0 f16, 1 f32, 2 q8_0, 3 fp8_e5m2), head_dim, n_group, n_ctx
void bm_attention(benchmark::State& state) {
  const auto isa = static_cast<isa_level>(state.range(0));
  if (!usable(isa, state)) return;
  constexpr kv_dtype k_dtypes[] = {kv_dtype::f16, kv_dtype::f32, kv_dtype::q8_0, kv_dtype::fp8_e5m2};
  const kv_dtype dt = k_dtypes[state.range(1)];
  const int32_t hd = static_cast<int32_t>(state.range(2));
  const int32_t n_group = static_cast<int32_t>(state.range(3));
  const int32_t n_ctx = static_cast<int32_t>(state.range(4));
  const int32_t bs = 16, n_kv = 4;
  const int32_t n_blocks = (n_ctx + bs - 1) / bs;
  const size_t elems = static_cast<size_t>(2 * n_blocks) * n_kv * bs * hd;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> kf(elems), vf(elems);
  for (auto& x : kf) x = dist(rng);
  for (auto& x : vf) x = dist(rng);
  std::vector<uint16_t> kh(elems), vh(elems);
  for (size_t i = 0; i < elems; ++i) {
    kh[i] = f32_to_fp16(kf[i]);
    vh[i] = f32_to_fp16(vf[i]);
  }
  paged_kv_view kv;
  kv.dtype = dt;
  kv.block_size = bs;
  kv.n_kv_heads = n_kv;
  kv.head_dim = hd;
  kv.k = dt == kv_dtype::f16 ? static_cast<void*>(kh.data()) : static_cast<void*>(kf.data());
  kv.v = dt == kv_dtype::f16 ? static_cast<void*>(vh.data()) : static_cast<void*>(vf.data());
  // The quantized pools, stored from the same floats (one token row per (block, slot, head)).
  const int64_t head_bytes = kv_head_block_bytes(dt, bs, hd);
  std::vector<uint8_t> kq, vq;
  if (dt == kv_dtype::q8_0 || dt == kv_dtype::fp8_e5m2) {
    kq.resize(static_cast<size_t>(2 * n_blocks) * n_kv * head_bytes);
    vq.resize(kq.size());
    kv.k = kq.data();
    kv.v = vq.data();
    std::vector<float> krow(hd), vrow(hd);
    for (int32_t b = 0; b < 2 * n_blocks; ++b)
      for (int32_t h = 0; h < n_kv; ++h)
        for (int32_t s = 0; s < bs; ++s) {
          const size_t at = ((static_cast<size_t>(b) * n_kv + h) * bs + s) * hd;
          std::copy_n(kf.begin() + at, hd, krow.begin());
          std::copy_n(vf.begin() + at, hd, vrow.begin());
          ops_for(isa_level::scalar).kv_store(kv, b, s, h, krow.data(), vrow.data());
        }
  }
  std::vector<int32_t> table(2 * n_blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  std::vector<float> q(static_cast<size_t>(n_group) * hd), out(q.size());
  for (auto& x : q) x = dist(rng);
  std::vector<float> scratch(attention_scratch_floats(n_group, n_ctx));
  const ops_table& t = ops_for(isa);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (auto _ : state) {
    t.attention(q.data(), n_group, kv, 1, table.data(), 0, n_ctx, scale, nullptr, out.data(), scratch.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  // K and V bytes read per call (values and, for q8_0, scales).
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<int64_t>(n_ctx) * head_bytes / bs);
  state.counters["flops"] = benchmark::Counter(static_cast<double>(state.iterations()) * 4.0 * n_group * n_ctx * hd,
                                               benchmark::Counter::kIsRate);
}
BENCHMARK(bm_attention)
    ->ArgNames({"isa", "f32kv", "hd", "group", "ctx"})
    ->Args({1, 0, 64, 3, 512})
    ->Args({1, 1, 64, 3, 512})
    ->Args({1, 0, 128, 4, 512})
    ->Args({1, 0, 64, 3, 4096})
    ->Args({1, 0, 64, 1, 512})
    ->Args({2, 0, 64, 3, 512})
    ->Args({2, 1, 64, 3, 512})
    ->Args({2, 0, 128, 4, 512})
    ->Args({2, 0, 64, 3, 4096})
    ->Args({2, 0, 64, 1, 512})
    ->Args({2, 0, 64, 3, 64})
    ->Args({2, 0, 64, 3, 16})
    ->Args({1, 2, 64, 3, 512})
    ->Args({1, 3, 64, 3, 512})
    ->Args({2, 2, 64, 3, 512})
    ->Args({2, 3, 64, 3, 512})
    ->Args({2, 2, 64, 3, 4096})
    ->Args({2, 3, 64, 3, 4096})
    ->Args({0, 0, 64, 3, 512});

// args: isa, n
void bm_rms_norm(benchmark::State& state) {
  const auto isa = static_cast<isa_level>(state.range(0));
  if (!usable(isa, state)) return;
  const int64_t n = state.range(1);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n), w(n), y(n);
  for (auto& v : x) v = dist(rng);
  for (auto& v : w) v = dist(rng);
  const ops_table& t = ops_for(isa);
  for (auto _ : state) {
    t.rms_norm(x.data(), w.data(), y.data(), n, 1e-5f);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 3 * n * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(bm_rms_norm)->ArgNames({"isa", "n"})->Args({1, 2048})->Args({1, 4096})->Args({0, 2048});

// args: isa, chunked (0 delta_rule, 1 delta_rule_chunked), d (= dk = dv), n tokens per call.
// One head of one sequence; Qwen3-Next-80B-A3B runs 32 such heads (d = 128) in each of 36 layers.
void bm_delta_rule(benchmark::State& state) {
  const auto isa = static_cast<isa_level>(state.range(0));
  if (!usable(isa, state)) return;
  const bool chunked = state.range(1) != 0;
  const int32_t d = static_cast<int32_t>(state.range(2)), n = static_cast<int32_t>(state.range(3));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(n) * d), k(q.size()), v(q.size()), out(q.size());
  for (auto* x : {&q, &k, &v}) {
    for (auto& e : *x) e = dist(rng) / std::sqrt(static_cast<float>(d));
  }
  std::vector<float> g(n, -0.1f), beta(n, 0.5f), st(static_cast<size_t>(d) * d, 0.0f);
  std::vector<float> scratch(static_cast<size_t>(delta_rule_chunked_scratch_floats(d, d)));
  delta_rule_args a;
  a.q = q.data(); a.ld_q = d; a.k = k.data(); a.ld_k = d; a.v = v.data(); a.ld_v = d;
  a.g = g.data(); a.beta = beta.data(); a.out = out.data(); a.ld_out = d; a.state = st.data();
  a.n_tokens = n; a.dk = d; a.dv = d; a.scale = 1.0f / std::sqrt(static_cast<float>(d));
  const gdn_table& t = gdn_ops_for(isa);
  for (auto _ : state) {
    if (chunked) {
      t.delta_rule_chunked(a, scratch.data());
    } else {
      t.delta_rule(a);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);  // tokens
}
BENCHMARK(bm_delta_rule)
    ->ArgNames({"isa", "chunked", "d", "n"})
    ->Args({1, 0, 128, 1})
    ->Args({2, 0, 128, 1})
    ->Args({1, 0, 128, 512})
    ->Args({2, 0, 128, 512})
    ->Args({1, 1, 128, 512})
    ->Args({2, 1, 128, 512})
    ->Args({0, 0, 128, 64})
    ->Args({0, 1, 128, 64});

// args: isa, n_ch, n tokens; kernel 4 with silu (Qwen3-Next-80B-A3B: 8192 channels).
void bm_short_conv(benchmark::State& state) {
  const auto isa = static_cast<isa_level>(state.range(0));
  if (!usable(isa, state)) return;
  const int64_t n_ch = state.range(1);
  const int32_t n = static_cast<int32_t>(state.range(2)), kernel = 4;
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n) * n_ch), y(x.size()), w(static_cast<size_t>(n_ch) * kernel);
  std::vector<float> st(static_cast<size_t>(kernel - 1) * n_ch, 0.0f);
  for (auto& e : x) e = dist(rng);
  for (auto& e : w) e = dist(rng);
  const gdn_table& t = gdn_ops_for(isa);
  for (auto _ : state) {
    t.short_conv(x.data(), n_ch, w.data(), kernel, st.data(), y.data(), n_ch, n, n_ch, true);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);  // tokens
}
BENCHMARK(bm_short_conv)
    ->ArgNames({"isa", "ch", "n"})
    ->Args({1, 8192, 1})
    ->Args({2, 8192, 1})
    ->Args({1, 8192, 512})
    ->Args({2, 8192, 512})
    ->Args({0, 8192, 64});

}  // namespace

BENCHMARK_MAIN();
