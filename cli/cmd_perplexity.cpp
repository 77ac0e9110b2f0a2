// `spate perplexity`: the perplexity of a model over a text file, computed
// the way llama.cpp's llama-perplexity does, so the two compare directly:
//   * the file is tokenized once, BOS added as the model asks;
//   * it is cut into chunks of --ctx-size tokens (a trailing partial chunk is
//     dropped); each chunk starts from an empty KV cache, its first token
//     replaced by BOS when the model adds one;
//   * only the second half of each chunk is scored: for positions
//     j in [ctx/2, ctx - 1), -log p(token j+1 | tokens 0..j);
//   * PPL = exp(mean NLL), with the estimate's standard error
//     PPL * sqrt(var(NLL) / (n - 1)).
// Prints llama-perplexity's progress ("[1]12.3456,[2]...") and "Final
// estimate: PPL = X +/- Y" on stdout, and with --json one JSON line instead.
// The KV cache has --kv-cache-dtype's element type: this is how the quantized
// KV types' quality is measured (perf/README.md, "KV cache dtypes").
#include <boost/json.hpp>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <sstream>
#include <spdlog/spdlog.h>
#include <string>
#include <vector>

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/model_loader.h"
#include "model/model_paths.h"
#include "model/model_runner.h"
#include "model/thread_pool.h"
#include "util/regular_file.h"

namespace spate::cli {

namespace po = boost::program_options;

namespace {

struct perplexity_options {
  std::string model_path, text_path, kv_dtype = "f16", log_level = "warn";
  int32_t n_ctx = 512, n_batch = 512, n_chunks = -1, n_threads = 0, block_size = 16;
  bool json = false;
};

// Running sums of the scored tokens' negative log-likelihoods.
struct nll_sums {
  double nll = 0, nll2 = 0;
  int64_t n = 0;
  double ppl() const { return n ? std::exp(nll / static_cast<double>(n)) : 0.0; }
  double ppl_error() const {
    if (n < 2) return 0.0;
    const double mean = nll / static_cast<double>(n);
    const double var = std::max(0.0, nll2 / static_cast<double>(n) - mean * mean);
    return ppl() * std::sqrt(var / static_cast<double>(n - 1));
  }
};

// -log softmax(row)[target], in double.
double token_nll(const float* row, int32_t n_vocab, int32_t target) {
  float mx = row[0];
  for (int32_t i = 1; i < n_vocab; ++i) mx = std::max(mx, row[i]);
  double sum = 0;
  for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(row[i]) - mx);
  return std::log(sum) - (static_cast<double>(row[target]) - mx);
}

// Scores one chunk (tokens of n_ctx, BOS already placed) into sums; the
// forward runs in sub-batches of n_batch tokens over the same blocks.
void score_chunk(model_runner& runner, const std::vector<int32_t>& chunk, const std::vector<int32_t>& table, int32_t n_batch,
                 int32_t n_vocab, std::vector<float>& logits, nll_sums& sums) {
  const int32_t n_ctx = static_cast<int32_t>(chunk.size());
  const int32_t first = n_ctx / 2;
  for (int32_t start = 0; start < n_ctx; start += n_batch) {
    const int32_t n = std::min(n_batch, n_ctx - start);
    forward_seq s;
    s.tokens = std::span<const int32_t>(chunk.data() + start, static_cast<size_t>(n));
    s.n_past = start;
    s.block_table = table;
    // Logits of positions max(first, start) .. start + n - 1 (the last rows of this sub-batch).
    s.n_logits = std::max(0, start + n - std::max(first, start));
    forward_batch b;
    b.seqs.push_back(s);
    runner.forward(b, logits.data());
    const int32_t row0 = start + n - s.n_logits;  // position of the first logit row
    for (int32_t r = 0; r < s.n_logits; ++r) {
      const int32_t pos = row0 + r;
      if (pos + 1 >= n_ctx) break;  // the last position predicts nothing in this chunk
      const double v = token_nll(logits.data() + static_cast<size_t>(r) * static_cast<size_t>(n_vocab), n_vocab, chunk[pos + 1]);
      sums.nll += v;
      sums.nll2 += v * v;
      ++sums.n;
    }
  }
}

int parse_args(int argc, char** argv, perplexity_options& o) {
  po::options_description desc("spate perplexity: a model's perplexity over a text file (as llama.cpp's llama-perplexity computes it)");
  desc.add_options()("model,m", po::value(&o.model_path), "GGUF model file (default: the cached SmolLM2-135M-Instruct Q4_1)")
      ("file,f", po::value(&o.text_path), "the text file to score (required)")
      ("ctx-size,c", po::value(&o.n_ctx)->default_value(512), "tokens per chunk; the second half of each is scored")
      ("batch-size,b", po::value(&o.n_batch)->default_value(512), "tokens per forward pass")
      ("chunks", po::value(&o.n_chunks)->default_value(-1), "score at most this many chunks (-1: all)")
      ("threads,t", po::value(&o.n_threads)->default_value(0), "device executor threads (0 = physical cores)")
      ("kv-cache-dtype", po::value(&o.kv_dtype)->default_value("f16"), "KV cache element type (as spate serve)")
      ("json", po::bool_switch(&o.json), "print one JSON object instead of llama-perplexity's lines")
      ("log-level", po::value(&o.log_level)->default_value("warn"), "log level")
      ("help,h", "show this help");
  po::variables_map vm;
  if (int rc = parse_command_line("perplexity", argc, argv, desc, vm); rc >= 0) return rc;
  std::string err;
  if (o.text_path.empty()) err = "--file is required";
  else if (o.n_ctx < 16 || o.n_ctx > 131072) err = "--ctx-size must be in [16, 131072]";
  else if (o.n_batch < 1 || o.n_batch > 8192) err = "--batch-size must be in [1, 8192]";
  else if (o.n_threads < 0 || o.n_threads > 1024) err = "--threads must be in [0, 1024]";
  if (!err.empty()) {
    std::cerr << "spate perplexity: " << err << "\n";
    return 2;
  }
  return -1;
}

std::string read_text(const std::string& path) {
  constexpr size_t k_max_bytes = 256u << 20;
  std::string text;
  if (auto err = read_regular_file(path, text, k_max_bytes); !err.empty()) throw std::runtime_error("cannot open '" + path + "': " + err);
  return text;
}

}  // namespace

int run_perplexity(int argc, char** argv) {
  perplexity_options o;
  if (int rc = parse_args(argc, argv, o); rc >= 0) return rc;
  spdlog::set_level(spdlog::level::from_str(o.log_level));
  try {
    isa_options isa;
    if (std::string e = read_isa_env(isa); !e.empty()) throw std::invalid_argument(e);
    const std::string kernels = init_kernels(isa);
    const kernels::kv_dtype dtype = parse_kv_dtype(o.kv_dtype);
    if (o.model_path.empty()) o.model_path = default_model_path();
    if (o.n_threads == 0) o.n_threads = physical_core_count();
    auto m = load_model(o.model_path, kernels::active_isa());
    std::vector<int32_t> tokens = m->tok->encode(read_text(o.text_path), /*add_special=*/true, /*parse_special=*/false);
    const int64_t n_max = static_cast<int64_t>(tokens.size()) / o.n_ctx;
    if (static_cast<int64_t>(tokens.size()) < 2 * static_cast<int64_t>(o.n_ctx))
      throw std::runtime_error("the text has " + std::to_string(tokens.size()) + " tokens; at least " + std::to_string(2 * o.n_ctx) +
                               " (2 x --ctx-size) are needed");
    const int64_t n_chunks = o.n_chunks < 0 ? n_max : std::min<int64_t>(o.n_chunks, n_max);
    const int32_t n_blocks = (o.n_ctx + o.block_size - 1) / o.block_size;
    thread_pool pool(o.n_threads);
    kv_cache kv(m->config, n_blocks, o.block_size, dtype);
    model_runner runner(m->config, m->weights, kv, pool);
    const int32_t n_batch = std::min(o.n_batch, o.n_ctx);
    runner.reserve(n_batch, n_batch, o.n_ctx);
    const int32_t n_vocab = m->config.n_vocab;
    std::vector<float> logits(static_cast<size_t>(n_batch) * static_cast<size_t>(n_vocab));
    std::vector<int32_t> table(static_cast<size_t>(n_blocks));
    std::iota(table.begin(), table.end(), 0);
    const int32_t bos = m->tok->bos_id();
    const bool add_bos = !tokens.empty() && bos >= 0 && tokens[0] == bos;
    if (!o.json)
      std::cout << "perplexity: " << tokens.size() << " tokens, " << n_chunks << " chunks of " << o.n_ctx << ", KV " << o.kv_dtype << ", "
                << kernels << ", " << o.n_threads << " threads\n";
    nll_sums sums;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t c = 0; c < n_chunks; ++c) {
      std::vector<int32_t> chunk(tokens.begin() + c * o.n_ctx, tokens.begin() + (c + 1) * o.n_ctx);
      if (add_bos) chunk[0] = bos;
      score_chunk(runner, chunk, table, n_batch, n_vocab, logits, sums);
      if (!o.json) std::cout << "[" << (c + 1) << "]" << std::fixed << std::setprecision(4) << sums.ppl() << "," << std::flush;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (o.json) {
      boost::json::object r{{"model", o.model_path}, {"file", o.text_path}, {"kv_cache_dtype", o.kv_dtype}, {"ctx_size", o.n_ctx},
                            {"chunks", n_chunks}, {"tokens_scored", sums.n}, {"ppl", sums.ppl()}, {"ppl_error", sums.ppl_error()},
                            {"seconds", seconds}};
      std::cout << boost::json::serialize(r) << "\n";
    } else {
      std::cout << "\nFinal estimate: PPL = " << std::fixed << std::setprecision(4) << sums.ppl() << " +/- " << std::setprecision(5)
                << sums.ppl_error() << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "spate perplexity: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace spate::cli
