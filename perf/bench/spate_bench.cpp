// spate's model benchmark, shaped like llama-bench / llama-batched-bench so the
// figures line up with llama.cpp's in perf/scripts/bench_vs_llamacpp.sh:
//   pp<N>   one forward pass over an N-token prompt (logits for the last token)
//   tg<N>   N single-sequence decode steps from an empty cache
//   bd<B>   B sequences decoding together (after a short prefill), aggregate tokens/s
//   tg<N>@d<D> (--depth D) the same N decode steps after a D-token context (llama-bench -d D)
// --kv-cache-dtype picks the KV cache's element type (as spate serve).
// Prints one JSON object per metric with the median over --reps repetitions.
#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <vector>

#include "bench_args.h"
#include "engine/block_pool.h"
#include "model/gguf_file.h"
#include "model/kv_cache.h"
#include "model/model_config.h"
#include "model/model_runner.h"
#include "engine/sampler.h"
#include "model/model_weights.h"
#include "model/thread_pool.h"
#include "cli/cli_options.h"
#include "kernels/isa.h"
#include "model/model_paths.h"
#include "util/trace.h"

namespace po = boost::program_options;
using namespace spate;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Greedy choice with the engine's sampler argmax (vectorized): a scalar
// std::max_element over Gemma's 262k logits took 18% of bd16's time, work
// the engine does not do that way (and llama-batched-bench does not sample).
int32_t argmax(const float* x, int32_t n) { return sampler::argmax(std::span<const float>(x, static_cast<size_t>(n))); }

// The next pseudo-random token below n_vocab (xorshift32 on state x).
int32_t next_random_token(uint32_t& x, int32_t n_vocab) {
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return static_cast<int32_t>(x % static_cast<uint32_t>(n_vocab));
}

void report(const char* metric, const std::vector<double>& tok_s, int threads) {
  std::printf("{\"engine\":\"spate\",\"metric\":\"%s\",\"tok_s\":%.2f,\"min\":%.2f,\"max\":%.2f,\"reps\":%zu,\"threads\":%d}\n", metric,
              median(tok_s), *std::min_element(tok_s.begin(), tok_s.end()), *std::max_element(tok_s.begin(), tok_s.end()),
              tok_s.size(), threads);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path = default_model_path();
  int threads = 2, reps = 5, pp = 512, tg = 128, batch = 16, bd_prompt = 32, bd_gen = 64, depth = 0;
  std::string only, trace_dir, weights_isa, bd_tokens = "argmax", kv_dtype_name = "f16";
  bool force_reference = false;
  po::options_description desc("spate_bench");
  desc.add_options()("model", po::value(&model_path))("threads", po::value(&threads))("reps", po::value(&reps))(
      "pp", po::value(&pp))("tg", po::value(&tg))("batch", po::value(&batch))("bd-prompt", po::value(&bd_prompt))(
      "bd-gen", po::value(&bd_gen))("only", po::value(&only), "pp|tg|bd")(
      "depth", po::value(&depth), "tg decodes after a context of this many tokens (prefilled, untimed)")(
      "kv-cache-dtype", po::value(&kv_dtype_name), "KV cache element type (as spate serve --kv-cache-dtype)")(
      "bd-tokens", po::value(&bd_tokens),
      "bd's tokens, one or more of (comma-separated, each a run): argmax (distinct prompts, each sequence's greedy "
      "tokens: metric bd<B>), random (distinct "
      "pseudo-random tokens at every position, as llama.cpp's llama-batched-bench feeds: bd<B>_rand) or zero (token 0 "
      "everywhere, as ik_llama.cpp 0.1.5's llama-batched-bench feeds, so every sequence routes to the same experts: "
      "bd<B>_tok0)")(
      "reference", po::bool_switch(&force_reference), "the scalar reference kernels (as SPATE_FORCE_REFERENCE=1)")(
      "trace-dir", po::value(&trace_dir), "record the step profiler's op spans of the whole run into DIR (perf/scripts/op_breakdown.py)")(
      "weights-isa", po::value(&weights_isa), "avx2: run the matmuls on the AVX2 kernels on an AVX-512 CPU (other ops unchanged)");
  po::variables_map vm;
  if (const auto code = spate::perf::parse_args("spate_bench", argc, argv, desc, vm)) return *code;
  // The kernel level as the server picks it: SPATE_FORCE_REFERENCE (or
  // --reference) and SPATE_MAX_ISA, read once here.
  cli::isa_options isa;
  if (const std::string err = cli::read_isa_env(isa); !err.empty()) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 2;
  }
  const bool env_reference = isa.force_reference;
  isa.force_reference = env_reference || force_reference;
  std::string kernels_used = cli::init_kernels(isa);
  if (force_reference && !env_reference) {
    kernels_used = std::string(kernels::isa_name(kernels::active_isa())) + " (--reference)";
  }

  std::vector<std::string> bd_modes;
  for (size_t a = 0; a <= bd_tokens.size();) {
    const size_t b = std::min(bd_tokens.find(',', a), bd_tokens.size());
    bd_modes.push_back(bd_tokens.substr(a, b - a));
    if (bd_modes.back() != "argmax" && bd_modes.back() != "random" && bd_modes.back() != "zero") {
      std::fprintf(stderr, "--bd-tokens: argmax, random or zero (comma-separated), not '%s'\n", bd_modes.back().c_str());
      return 2;
    }
    a = b + 1;
  }
  if (depth < 0) {
    std::fprintf(stderr, "--depth must be >= 0\n");
    return 2;
  }
  kernels::kv_dtype kv_dtype = kernels::kv_dtype::f16;
  try {
    kv_dtype = cli::parse_kv_dtype(kv_dtype_name);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  auto file = gguf_file::open(model_path);
  const model_config cfg = read_model_config(*file);
  kernels::isa_level level = kernels::active_isa();
  if (weights_isa == "avx2" && kernels::cpu_supports(kernels::isa_level::avx2)) {
    level = kernels::isa_level::avx2;
  } else if (!weights_isa.empty()) {
    std::fprintf(stderr, "--weights-isa: only avx2 (on a CPU that has it) is supported\n");
    return 2;
  }
  const model_weights w = load_model_weights(*file, cfg, level);
  const int32_t block_size = 16;
  const int32_t n_blocks = std::max({pp, tg + depth + 1, (bd_prompt + bd_gen + 1 + block_size) * std::max(batch, 1)}) / block_size + 64;
  thread_pool pool(threads);
  kv_cache kv(cfg, n_blocks, block_size, kv_dtype);
  block_pool blocks(n_blocks);
  model_runner runner(cfg, w, kv, pool);
  std::vector<float> logits(static_cast<size_t>(cfg.n_vocab) * std::max(batch, 1));
  std::fprintf(stderr, "model %s, %d threads, kernels %s, matmuls %s, KV %s\n", model_path.c_str(), threads,
               kernels_used.c_str(), kernels::isa_name(level), kv_dtype_name.c_str());

  if (!trace_dir.empty()) {
    if (const std::string err = trace::start(trace_dir); !err.empty()) {
      std::fprintf(stderr, "--trace-dir: %s\n", err.c_str());
      return 2;
    }
  }

  // Deterministic pseudo-random prompt tokens.
  auto prompt_tokens = [&](int n, uint32_t salt) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    uint32_t x = 2463534242u ^ salt;
    for (auto& v : t) v = next_random_token(x, cfg.n_vocab);
    return t;
  };

  if (only.empty() || only == "pp") {
    block_table bt(blocks);
    bt.grow_to(pp, block_size);
    const auto toks = prompt_tokens(pp, 1);
    forward_batch b;
    b.seqs.push_back({toks, 0, bt.ids(), 1});
    runner.forward(b, logits.data());  // warm-up
    std::vector<double> r;
    for (int i = 0; i < reps; ++i) {
      const double t0 = now_s();
      runner.forward(b, logits.data());
      r.push_back(pp / (now_s() - t0));
    }
    report(("pp" + std::to_string(pp)).c_str(), r, threads);
  }
  if (only.empty() || only == "tg") {
    block_table bt(blocks);
    bt.grow_to(depth + tg + 1, block_size);
    const auto context = prompt_tokens(depth, 7);
    for (int32_t start = 0; start < depth; start += 512) {  // the context, once (each rep decodes over it again)
      forward_batch b;
      b.seqs.push_back({std::span<const int32_t>(context.data() + start, static_cast<size_t>(std::min(512, depth - start))), start,
                        bt.ids(), 1});
      runner.forward(b, logits.data());
    }
    std::vector<double> r;
    for (int i = 0; i <= reps; ++i) {
      int32_t tok = 1;
      const double t0 = now_s();
      for (int p = 0; p < tg; ++p) {
        forward_batch b;
        b.seqs.push_back({std::span<const int32_t>(&tok, 1), depth + p, bt.ids(), 1});
        runner.forward(b, logits.data());
        tok = argmax(logits.data(), cfg.n_vocab);
      }
      if (i > 0) r.push_back(tg / (now_s() - t0));  // the first run warms up
    }
    report(("tg" + std::to_string(tg) + (depth ? "@d" + std::to_string(depth) : "")).c_str(), r, threads);
  }
  for (const std::string& mode : bd_modes) {
    if (!(only.empty() || only == "bd") || batch <= 0) break;
    // The next token of sequence s (mode).
    uint32_t rng = 88172645u;
    auto next_token = [&](int s) {
      if (mode == "zero") return int32_t{0};
      if (mode == "random") return next_random_token(rng, cfg.n_vocab);
      return argmax(logits.data() + static_cast<size_t>(s) * cfg.n_vocab, cfg.n_vocab);
    };
    std::vector<double> r;
    for (int i = 0; i <= reps; ++i) {
      std::vector<block_table> bts;
      std::vector<std::vector<int32_t>> prompts;
      std::vector<int32_t> last(static_cast<size_t>(batch));
      forward_batch b;
      for (int s = 0; s < batch; ++s) {
        bts.emplace_back(blocks);
        bts.back().grow_to(bd_prompt + bd_gen + 1, block_size);
        prompts.push_back(mode == "zero" ? std::vector<int32_t>(static_cast<size_t>(bd_prompt), 0)
                                              : prompt_tokens(bd_prompt, 100 + s));
      }
      for (int s = 0; s < batch; ++s) b.seqs.push_back({prompts[static_cast<size_t>(s)], 0, bts[static_cast<size_t>(s)].ids(), 1});
      runner.forward(b, logits.data());
      for (int s = 0; s < batch; ++s) last[static_cast<size_t>(s)] = next_token(s);
      const double t0 = now_s();
      for (int g = 0; g < bd_gen; ++g) {
        b.seqs.clear();
        for (int s = 0; s < batch; ++s) {
          b.seqs.push_back({std::span<const int32_t>(&last[static_cast<size_t>(s)], 1), bd_prompt + g, bts[static_cast<size_t>(s)].ids(), 1});
        }
        runner.forward(b, logits.data());
        for (int s = 0; s < batch; ++s) last[static_cast<size_t>(s)] = next_token(s);
      }
      if (i > 0) r.push_back(static_cast<double>(batch) * bd_gen / (now_s() - t0));
    }
    const char* suffix = mode == "zero" ? "_tok0" : mode == "random" ? "_rand" : "";
    report(("bd" + std::to_string(batch) + suffix).c_str(), r, threads);
  }
  if (!trace_dir.empty()) {
    const trace::session_result t = trace::stop();
    if (!t.error.empty()) {
      std::fprintf(stderr, "trace: %s\n", t.error.c_str());
      return 1;
    }
    std::fprintf(stderr, "trace: %s (%lld spans, %lld dropped)\n", t.path.c_str(), static_cast<long long>(t.n_events),
                 static_cast<long long>(t.n_dropped));
  }
  return 0;
}
