// Matmul throughput for the default model's shapes (SmolLM2-135M: hidden 576,
// kv 192, ffn 1536, vocab 49152) on ONE thread.
// Reports GFLOP/s (2 * n_out * n_in * n_rows per iteration, activation
// quantization included) and rows/s.
// Args: rows, isa (1 = avx2, 2 = avx512; a level the CPU lacks is skipped), so
// the same shape at both levels reads off the speedup:
//   ./build-k/perf/bench_matmul --benchmark_filter='Q4_1_576x576/rows:512'
//   ./build-k/perf/bench_matmul --benchmark_filter='isa:2'
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/fp16.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"

namespace {

using namespace spate::kernels;

std::vector<uint8_t> random_weight(ggml_type t, int64_t n_out, int64_t n_in) {
  const auto tr = *traits_of(uint32_t(t));
  std::vector<uint8_t> w(size_t(row_bytes(tr, n_in) * n_out));
  std::mt19937 rng(42);
  for (auto& b : w) b = uint8_t(rng());
  const int64_t nblk = n_out * n_in / tr.block_elems;
  const uint16_t h = f32_to_fp16(0.01f);
  for (int64_t i = 0; i < nblk; ++i) {
    uint8_t* b = w.data() + i * tr.block_bytes;
    if (t == ggml_type::mxfp4) {  // an E8M0 exponent, no fp16 scale: 2^-8
      b[0] = 120;
      continue;
    }
    // Offset of the fp16 d (and dmin right after it for Q4_1 / Q4_K / Q2_K).
    const int64_t at = t == ggml_type::q6_k ? 208 : (t == ggml_type::q3_k ? 108 : (t == ggml_type::q2_k ? 80 : 0));
    std::memcpy(b + at, &h, 2);
    if (t == ggml_type::q4_1 || t == ggml_type::q4_k || t == ggml_type::q2_k) std::memcpy(b + at + 2, &h, 2);
  }
  return w;
}

// The isa_level of benchmark arg `i`, or false (benchmark skipped) when the CPU lacks it.
bool level_arg(benchmark::State& st, int i, isa_level& level) {
  level = static_cast<isa_level>(st.range(i));
  if (cpu_supports(level)) return true;
  st.SkipWithError((std::string("CPU lacks ") + isa_name(level)).c_str());
  return false;
}

void bm(benchmark::State& st, ggml_type t, int64_t n_out, int64_t n_in) {
  const int64_t n_rows = st.range(0);
  isa_level level;
  if (!level_arg(st, 1, level)) return;
  const auto wq = random_weight(t, n_out, n_in);
  const packed_weight w = pack_weight(t, wq.data(), n_out, n_in, level);
  std::vector<float> x(size_t(n_rows * n_in));
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  std::vector<uint8_t> act(act_bytes(w, n_rows));
  std::vector<float> y(size_t(n_rows * n_out));
  for (auto _ : st) {
    quantize_act(w, x.data(), n_in, 0, n_rows, act.data());
    matmul(w, act.data(), n_rows, y.data(), n_out, 0, n_out);
    benchmark::DoNotOptimize(y.data());
  }
  const double flops = 2.0 * double(n_out) * double(n_in) * double(n_rows);
  st.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["rows/s"] = benchmark::Counter(double(n_rows), benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(isa_name(w.isa()));
}

// rows {1, 16, 512} x isa {avx2, avx512}: types with avx512 kernels (quantized types).
void rows_isa(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "isa"})->ArgsProduct({{1, 16, 512}, {int64_t(isa_level::avx2), int64_t(isa_level::avx512)}});
}
// rows {1, 16, 512} at avx2 only: types the avx512 level runs with the avx2 kernels.
void rows_avx2(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "isa"})->ArgsProduct({{1, 16, 512}, {int64_t(isa_level::avx2)}});
}

#define SHAPES(T, NAME, ARGS)                                                                                       \
  BENCHMARK_CAPTURE(bm, NAME##_576x576, T, 576, 576)->Apply(ARGS)->Unit(benchmark::kMicrosecond); \
  BENCHMARK_CAPTURE(bm, NAME##_192x576, T, 192, 576)->Apply(ARGS)->Unit(benchmark::kMicrosecond); \
  BENCHMARK_CAPTURE(bm, NAME##_1536x576, T, 1536, 576)->Apply(ARGS)->Unit(benchmark::kMicrosecond); \
  BENCHMARK_CAPTURE(bm, NAME##_576x1536, T, 576, 1536)->Apply(ARGS)->Unit(benchmark::kMicrosecond);

SHAPES(ggml_type::q4_1, Q4_1, rows_isa)
SHAPES(ggml_type::q8_0, Q8_0, rows_isa)
// IQ4_NL: llama-quantize's fallback for the tensors of Q2_K / Q3_K mixes whose rows are not a multiple of 256.
SHAPES(ggml_type::iq4_nl, IQ4_NL, rows_isa)
// MXFP4: gpt-oss's expert type; IQ4_NL's kernels with an f32 scale per block (compare the two).
SHAPES(ggml_type::mxfp4, MXFP4, rows_isa)
// K-quants need n_in % 256 == 0: the model's 576-wide inputs do not qualify.
// Gemma 3 270M's K-quant shapes (inputs a multiple of 256): FFN down 2048 -> 640, attention output 1024 -> 640.
#define KSHAPES(T, NAME)                                                                                       \
  BENCHMARK_CAPTURE(bm, NAME##_576x1536, T, 576, 1536)->Apply(rows_isa)->Unit(benchmark::kMicrosecond);  \
  BENCHMARK_CAPTURE(bm, NAME##_640x2048, T, 640, 2048)->Apply(rows_isa)->Unit(benchmark::kMicrosecond);  \
  BENCHMARK_CAPTURE(bm, NAME##_640x1024, T, 640, 1024)->Apply(rows_isa)->Unit(benchmark::kMicrosecond);  \
  BENCHMARK_CAPTURE(bm, NAME##_2048x2048, T, 2048, 2048)->Apply(rows_isa)->Unit(benchmark::kMicrosecond);
// The 1B shape's FFN in Q4_0 (one thread): gate / up 2048 -> 8192 and down 8192 -> 2048, whose
// long rows (a 32-column weight slice of 147 KiB) do not stay in L1 across the row tiles.
BENCHMARK_CAPTURE(bm, Q4_0_8192x2048, ggml_type::q4_0, 8192, 2048)->Apply(rows_isa)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm, Q4_0_2048x8192, ggml_type::q4_0, 2048, 8192)->Apply(rows_isa)->Unit(benchmark::kMillisecond);
KSHAPES(ggml_type::q4_k, Q4_K)
KSHAPES(ggml_type::q6_k, Q6_K)
KSHAPES(ggml_type::q3_k, Q3_K)
KSHAPES(ggml_type::q2_k, Q2_K)
SHAPES(ggml_type::q5_0, Q5_0, rows_isa)
SHAPES(ggml_type::f16, F16, rows_avx2)
// 5 groups: the column chunk the engine gives the o / down projections (tail of one group per tile).
BENCHMARK_CAPTURE(bm, F16_40x576, ggml_type::f16, 40, 576)->ArgNames({"rows", "isa"})->Args({512, 1})->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(bm, BF16_1536x576, ggml_type::bf16, 1536, 576)->Apply(rows_avx2)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(bm, F32_1536x576, ggml_type::f32, 1536, 576)->Apply(rows_avx2)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(bm, Q8_0_49152x576, ggml_type::q8_0, 49152, 576)->Apply(rows_isa)->Unit(benchmark::kMillisecond);

}  // namespace

namespace {

// Whole-model matmul time for SmolLM2-135M shapes (30 layers of q,k,v,o,gate,up,down in `t`,
// plus the 49152x576 Q8_0 head for ONE row, as in prompt processing / decode), one thread.
// Weights total ~96 MB (Q4_1), so single-row runs stream them from DRAM as real decode does.
// tok/s counter = n_rows / time (matmuls only, one thread).
void bm_model(benchmark::State& st, ggml_type t) {
  const int64_t n_rows = st.range(0);
  isa_level level;
  if (!level_arg(st, 1, level)) return;
  struct mat { int64_t n_out, n_in; };
  const mat layer[] = {{576, 576}, {192, 576}, {192, 576}, {576, 576}, {1536, 576}, {1536, 576}, {576, 1536}};
  std::vector<packed_weight> ws;
  for (int l = 0; l < 30; ++l)
    for (const mat& m : layer) {
      const auto raw = random_weight(t, m.n_out, m.n_in);
      ws.push_back(pack_weight(t, raw.data(), m.n_out, m.n_in, level));
    }
  const auto head_raw = random_weight(ggml_type::q8_0, 49152, 576);
  const packed_weight head = pack_weight(ggml_type::q8_0, head_raw.data(), 49152, 576, level);
  std::vector<float> x(size_t(n_rows * 1536), 0.5f), y(size_t(n_rows) * 49152);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  std::vector<uint8_t> act(act_bytes(ws[6], n_rows));
  for (auto _ : st) {
    for (const packed_weight& w : ws) {
      quantize_act(w, x.data(), w.n_in(), 0, n_rows, act.data());
      matmul(w, act.data(), n_rows, y.data(), w.n_out(), 0, w.n_out());
    }
    quantize_act(head, x.data(), 576, 0, 1, act.data());
    matmul(head, act.data(), 1, y.data(), 49152, 0, 49152);
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["tok/s"] = benchmark::Counter(double(n_rows), benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(isa_name(level));
}

// Four layers of the 1B shape (hidden 2048, kv 512, FFN 8192) in `t` for ONE row, one
// thread: ~140 MB at 4.5 bits per weight, so each pass streams the weights from DRAM as
// decode on a 1B model does. GB/s counter = packed weight bytes read per second.
void bm_model_1b(benchmark::State& st, ggml_type t) {
  isa_level level;
  if (!level_arg(st, 1, level)) return;
  struct mat { int64_t n_out, n_in; };
  const mat layer[] = {{2048, 2048}, {512, 2048}, {512, 2048}, {2048, 2048}, {8192, 2048}, {8192, 2048}, {2048, 8192}};
  std::vector<packed_weight> ws;
  double bytes = 0;
  for (int l = 0; l < 4; ++l)
    for (const mat& m : layer) {
      const auto raw = random_weight(t, m.n_out, m.n_in);
      ws.push_back(pack_weight(t, raw.data(), m.n_out, m.n_in, level));
      bytes += double(raw.size());
    }
  std::vector<float> x(8192), y(8192);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  std::vector<uint8_t> act(act_bytes(ws[6], 1));
  for (auto _ : st) {
    for (const packed_weight& w : ws) {
      quantize_act(w, x.data(), w.n_in(), 0, 1, act.data());
      matmul(w, act.data(), 1, y.data(), w.n_out(), 0, w.n_out());
    }
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(isa_name(level));
}
void one_row_isa(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "isa"})->ArgsProduct({{1}, {int64_t(isa_level::avx2), int64_t(isa_level::avx512)}});
}
BENCHMARK_CAPTURE(bm_model_1b, Q4_0, ggml_type::q4_0)->Apply(one_row_isa)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(bm_model_1b, Q4_K, ggml_type::q4_k)->Apply(one_row_isa)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(bm_model_1b, Q6_K, ggml_type::q6_k)->Apply(one_row_isa)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(bm_model_1b, IQ4_NL, ggml_type::iq4_nl)->Apply(one_row_isa)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(bm_model_1b, MXFP4, ggml_type::mxfp4)->Apply(one_row_isa)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_CAPTURE(bm_model, Q4_1, ggml_type::q4_1)->Apply(rows_isa)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_model, Q8_0, ggml_type::q8_0)->Apply(rows_isa)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_model, F16, ggml_type::f16)->Apply(rows_avx2)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
