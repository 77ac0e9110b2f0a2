// Grammar engine micro-benchmarks: GBNF and corpus JSON Schema compile time,
// and the token-mask walk over a real vocabulary at matcher states that
// allow few and many tokens. Usage: bench_grammar [VOCAB.gguf] [benchmark flags]
// (default vocabulary: ../shared/testdata/tokenizer/ggml-vocab-gpt-2.gguf
// next to the checkout).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/mask_cache.h"
#include "grammar/vocab_trie.h"
#include "model/gguf_file.h"
#include "model/tokenizer_gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace spate;

const char* k_json = R"(
root   ::= "{" ws pair ("," ws pair)* "}"
pair   ::= string ":" ws value ws
value  ::= string | number | "true" | "false" | "null" | "[" ws (value ws ("," ws value ws)*)? "]"
string ::= "\"" ([^"\\] | "\\" ["\\/bfnrt])* "\""
number ::= "-"? [0-9]+ ("." [0-9]+)?
ws     ::= [ \t\n]*
)";

std::shared_ptr<const grammar::vocab_trie> g_trie;

void bm_compile_json(benchmark::State& st) {
  for (auto _ : st) benchmark::DoNotOptimize(grammar::parse_gbnf(k_json));
}

void bm_mask(benchmark::State& st, const std::string& prefix) {
  const auto g = std::make_shared<const grammar::grammar>(grammar::parse_gbnf(k_json));
  grammar::matcher m(g);
  if (!m.advance(prefix)) {
    st.SkipWithError("prefix not accepted");
    return;
  }
  std::vector<uint8_t> mask;
  size_t n_allowed = 0;
  for (auto _ : st) {
    g_trie->allowed_tokens(m, mask);
    benchmark::DoNotOptimize(mask.data());
  }
  for (uint8_t a : mask) n_allowed += a;
  st.counters["allowed_tokens"] = static_cast<double>(n_allowed);
}

// The cached mask: cold = a fresh cache (first visit of the state, the
// memoized walk), warm = the state seen before (a hash and a lookup).
void bm_mask_cached(benchmark::State& st, const std::string& prefix, bool warm) {
  const auto g = std::make_shared<const grammar::grammar>(grammar::parse_gbnf(k_json));
  grammar::matcher m(g);
  if (!m.advance(prefix)) {
    st.SkipWithError("prefix not accepted");
    return;
  }
  grammar::mask_cache shared(g, g_trie);
  size_t n_allowed = 0;
  for (auto _ : st) {
    if (warm) {
      n_allowed = shared.mask(m)->n_allowed;
    } else {
      grammar::mask_cache fresh(g, g_trie);
      n_allowed = fresh.mask(m)->n_allowed;
    }
  }
  st.counters["allowed_tokens"] = static_cast<double>(n_allowed);
  st.counters["trie_nodes"] = static_cast<double>(g_trie->n_nodes());
  st.counters["max_token_bytes"] = static_cast<double>(g_trie->max_token_bytes());
}

// JSON Schema -> grammar for one corpus schema (tests/integration/schemas).
void bm_compile_schema(benchmark::State& st, const boost::json::value& schema) {
  for (auto _ : st) benchmark::DoNotOptimize(grammar::compile_json_schema(schema));
}

}  // namespace

int main(int argc, char** argv) {
  std::string vocab = std::string(SPATE_SOURCE_DIR) + "/../shared/testdata/tokenizer/ggml-vocab-gpt-2.gguf";
  if (argc > 1 && argv[1][0] != '-') {
    vocab = argv[1];
    --argc;
    ++argv;
  }
  auto f = spate::gguf_file::open(vocab);
  const spate::tokenizer tok(spate::tokenizer_from_gguf(*f));
  std::vector<std::string> pieces(static_cast<size_t>(tok.n_vocab()));
  for (int32_t id = 0; id < tok.n_vocab(); ++id) pieces[static_cast<size_t>(id)] = tok.token_to_piece(id);
  g_trie = std::make_shared<const spate::grammar::vocab_trie>(pieces);
  benchmark::RegisterBenchmark("compile/json_gbnf", bm_compile_json)->Unit(benchmark::kMicrosecond);
  for (const char* prefix : {"", "{\"a\": 1", "{\"na"}) {
    benchmark::RegisterBenchmark(("mask/json/after:'" + std::string(prefix) + "'").c_str(), bm_mask, std::string(prefix))
        ->Unit(benchmark::kMicrosecond);
  }
  for (const char* prefix : {"", "{\"a\": 1", "{\"na"}) {
    for (const bool warm : {false, true}) {
      const std::string name = std::string("mask_cache/") + (warm ? "warm" : "cold") + "/json/after:'" + prefix + "'";
      benchmark::RegisterBenchmark(name.c_str(), bm_mask_cached, std::string(prefix), warm)->Unit(benchmark::kMicrosecond);
    }
  }
  const std::string schema_dir = std::string(SPATE_SOURCE_DIR) + "/tests/integration/schemas";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(schema_dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  static std::vector<boost::json::value> schemas;  // outlive the registered benchmarks
  schemas.reserve(files.size());
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    schemas.push_back(boost::json::parse(ss.str()).at("schema"));
    benchmark::RegisterBenchmark(("compile/schema/" + f.stem().string()).c_str(), bm_compile_schema, schemas.back())
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
