// Token masks over a real vocabulary (GPT-2's 50,257 tokens, from
// ../shared/testdata): the trie walk must allow exactly the tokens that a
// brute-force check (a fresh matcher fed each token's bytes) accepts.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "grammar/gbnf_parser.h"
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
    trie_ = std::make_unique<vocab_trie>(*pieces_);
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
  }
  static inline std::unique_ptr<std::vector<std::string>> pieces_;
  static inline std::unique_ptr<vocab_trie> trie_;
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
