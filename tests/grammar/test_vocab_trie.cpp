// Token masks over a real vocabulary (GPT-2's 50,257 tokens, from
// ../shared/testdata): the trie walk must allow exactly the tokens that a
// brute-force check (a fresh matcher fed each token's bytes) accepts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "grammar/gbnf_parser.h"
#include "grammar/mask_cache.h"
#include "grammar/vocab_trie.h"
#include "model/gguf_file.h"
#include "model/tokenizer_gguf.h"
#include "tokenizer/tokenizer.h"

namespace spate::grammar {
namespace {

const std::string k_vocab = std::string(SPATE_TESTDATA_DIR) + "/tokenizer/ggml-vocab-gpt-2.gguf";

std::vector<std::string> pieces_of(const tokenizer& tok) {
  std::vector<std::string> p(static_cast<size_t>(tok.n_vocab()));
  for (int32_t id = 0; id < tok.n_vocab(); ++id) p[static_cast<size_t>(id)] = tok.token_to_piece(id);
  return p;
}

class VocabTrie : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(k_vocab)) return;
    auto f = gguf_file::open(k_vocab);
    const tokenizer tok(tokenizer_from_gguf(*f));
    pieces_ = std::make_unique<std::vector<std::string>>(pieces_of(tok));
    trie_ = std::make_shared<const vocab_trie>(*pieces_);
  }
  void SetUp() override {
    if (trie_ != nullptr) return;
    const char* req = std::getenv("SPATE_REQUIRE_TESTDATA");
    if (req && *req && std::string(req) != "0") FAIL() << "missing " << k_vocab << " (SPATE_REQUIRE_TESTDATA is set)";
    GTEST_SKIP() << "missing " << k_vocab;
  }
  // Compares the trie's mask with the brute force after feeding `prefix`.
  static void expect_mask_matches_brute_force(const std::string& gbnf, const std::string& prefix, size_t min_allowed) {
    const auto g = std::make_shared<const grammar>(parse_gbnf(gbnf));
    matcher m(g);
    ASSERT_TRUE(m.advance(prefix)) << prefix;
    std::vector<uint8_t> mask;
    trie_->allowed_tokens(m, mask);
    size_t n_allowed = 0;
    for (size_t id = 0; id < pieces_->size(); ++id) {
      const std::string& p = (*pieces_)[id];
      matcher fresh = m;
      const bool brute = !p.empty() && fresh.advance(p);
      ASSERT_EQ(mask[id] != 0, brute) << "token " << id << " '" << p << "' after '" << prefix << "'";
      n_allowed += brute;
    }
    EXPECT_GE(n_allowed, min_allowed) << gbnf;
    expect_cache_matches(g, m, mask);
  }
  // The cached mask (memoized transitions) equals the matcher walk's, twice
  // (the second time from the cache).
  static void expect_cache_matches(const std::shared_ptr<const grammar>& g, const matcher& m,
                                   const std::vector<uint8_t>& mask) {
    mask_cache cache(g, trie_);
    for (int round = 0; round < 2; ++round) {
      const auto cached = cache.mask(m);
      size_t n = 0;
      for (size_t id = 0; id < mask.size(); ++id) {
        ASSERT_EQ(cached->allows(static_cast<int32_t>(id)), mask[id] != 0) << "token " << id << " round " << round;
        n += mask[id];
      }
      EXPECT_EQ(cached->n_allowed, n);
      EXPECT_EQ(cached->can_end, m.can_end());
    }
    EXPECT_EQ(cache.stats().n_hits, 1u);
  }
  static inline std::unique_ptr<std::vector<std::string>> pieces_;
  static inline std::shared_ptr<const vocab_trie> trie_;
};

const char* k_json = R"(
root   ::= "{" ws pair ("," ws pair)* "}"
pair   ::= string ":" ws value ws
value  ::= string | number | "true" | "false" | "null" | "[" ws (value ws ("," ws value ws)*)? "]"
string ::= "\"" ([^"\\] | "\\" ["\\/bfnrt])* "\""
number ::= "-"? [0-9]+ ("." [0-9]+)?
ws     ::= [ \t\n]*
)";

TEST_F(VocabTrie, JsonMaskEqualsBruteForceAtSeveralStates) {
  EXPECT_GT(trie_->n_nodes(), 50000u);
  expect_mask_matches_brute_force(k_json, "", 1);                // only tokens starting with '{'
  expect_mask_matches_brute_force(k_json, "{\"na", 10000);       // inside a string: almost anything
  expect_mask_matches_brute_force(k_json, "{\"a\": 1", 10);      // digits, '.', ',', '}', spaces
  expect_mask_matches_brute_force(k_json, "{\"a\": [tr", 1);     // "ue" and its prefixes
}

TEST_F(VocabTrie, UnicodeClassMaskEqualsBruteForce) {
  expect_mask_matches_brute_force("root ::= [\\u00c0-\\u024f ]+", "", 50);
  expect_mask_matches_brute_force("root ::= [^a-zA-Z0-9]*", "", 1000);
}

// Feeding a JSON document byte by byte, the cache's mask equals the walk's
// at every state, and the states inside strings and numbers repeat.
TEST_F(VocabTrie, CachedMasksAlongADocumentEqualTheWalk) {
  const auto g = std::make_shared<const grammar>(parse_gbnf(k_json));
  mask_cache cache(g, trie_);
  matcher m(g);
  const std::string doc = "{\"name\": \"Ada Lovelace\", \"born\": 1815, \"tags\": [\"math\", \"poet\"]}";
  std::vector<uint8_t> mask;
  for (size_t i = 0; i <= doc.size(); ++i) {
    trie_->allowed_tokens(m, mask);
    const auto cached = cache.mask(m);
    for (size_t id = 0; id < mask.size(); ++id) {
      ASSERT_EQ(cached->allows(static_cast<int32_t>(id)), mask[id] != 0) << "token " << id << " at " << i;
    }
    if (i < doc.size()) {
      ASSERT_TRUE(m.advance(static_cast<uint8_t>(doc[i])));
    }
  }
  EXPECT_TRUE(m.can_end());
  EXPECT_GT(cache.stats().n_hits, 10u);  // e.g. each letter of "Lovelace" after the first
}

// Long bounded repetition: positions with more atoms left than the longest
// token share one state (few misses), and every mask still equals the walk's,
// also near the bound where the shared state would be wrong.
TEST_F(VocabTrie, BoundedRepetitionSharesStatesAndStaysExact) {
  const auto g = std::make_shared<const grammar>(parse_gbnf("root ::= \"\\\"\" [a-z ]{0,300} \"\\\"\""));
  mask_cache cache(g, trie_);
  matcher m(g);
  ASSERT_TRUE(m.advance("\""));
  std::vector<uint8_t> mask;
  for (int i = 0; i <= 300; ++i) {
    if (i % 7 == 0 || i > 280) {  // every mask checked near the bound
      trie_->allowed_tokens(m, mask);
      const auto cached = cache.mask(m);
      for (size_t id = 0; id < mask.size(); ++id) {
        ASSERT_EQ(cached->allows(static_cast<int32_t>(id)), mask[id] != 0) << "token " << id << " after " << i << " letters";
      }
    } else {
      cache.mask(m);
    }
    if (i < 300) {
      ASSERT_TRUE(m.advance(static_cast<uint8_t>('a' + i % 26)));
    }
  }
  // 300 positions, but the costly walk over the short tokens is shared by all
  // those more than k_short_token_bytes atoms from the bound.
  EXPECT_EQ(cache.stats().n_misses, 301u);
  EXPECT_LE(cache.stats().n_short_walks, static_cast<size_t>(k_short_token_bytes) + 2);
}

TEST(TokenMask, ApplySetsRefusedLogitsToMinusInfinity) {
  token_mask sparse;
  sparse.ids = {1, 4};
  token_mask dense;
  dense.bits = {(1u << 1) | (1u << 4)};
  for (const token_mask* m : {&sparse, &dense}) {
    std::vector<float> logits{0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f};
    m->apply(logits);
    EXPECT_EQ(logits[1], 1.5f);
    EXPECT_EQ(logits[4], 4.5f);
    for (size_t i : {0u, 2u, 3u, 5u}) EXPECT_TRUE(std::isinf(logits[i]) && logits[i] < 0) << i;
    EXPECT_TRUE(m->allows(4));
    EXPECT_FALSE(m->allows(5));
  }
}

TEST_F(VocabTrie, MatcherStateIsUnchangedByTheWalk) {
  const auto g = std::make_shared<const grammar>(parse_gbnf("root ::= \"yes\" | \"no\""));
  matcher m(g);
  ASSERT_TRUE(m.advance("y"));
  std::vector<uint8_t> mask;
  trie_->allowed_tokens(m, mask);
  EXPECT_EQ(m.allowed_bytes().count(), 1u);
  EXPECT_TRUE(m.advance("es"));
  EXPECT_TRUE(m.finished());
}

}  // namespace
}  // namespace spate::grammar
