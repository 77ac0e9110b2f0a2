// Constrained decoding with a reasoning parser
// (protocol/reasoning_constraint.h) over a small real vocabulary: the grammar
// waits for "</think>", tokens that would smuggle content past it are masked,
// thinking_token_budget forces the tag (one token or several, never inside a
// UTF-8 character), and qwen3's optional lead-in keeps both ways open.
#include "protocol/reasoning_constraint.h"

#include <gtest/gtest.h>

#include <cmath>

#include "protocol/constraint_compiler.h"
#include "protocol/openai_request.h"
#include "format_test_util.h"
#include "tokenizer/tokenizer.h"

namespace spate::api {
namespace {

using test::choice_of;

// <unk> <s> </s>, a..z, then pieces around the tags; with_tags: "<think>"
// and "</think>" are tokens too (user-defined, as in Qwen's vocabulary), of
// type tag_type.
tokenizer make_tokenizer(bool with_tags, int32_t tag_type = 4) {
  vocab_spec s = test::letters_vocab({"yes", "no", "<", "/", ">", "</", "<th", "k>", "k>yes", ">yes", "\xE2\x96\x81", "<0xC3>", "<0xA9>"});
  s.token_types[s.tokens.size() - 2] = 6;  // byte tokens
  s.token_types[s.tokens.size() - 1] = 6;
  if (with_tags) {
    s.tokens.emplace_back("<think>");
    s.tokens.emplace_back("</think>");
    s.token_types.push_back(tag_type);
    s.token_types.push_back(tag_type);
  }
  s.scores.assign(s.tokens.size(), 0.0f);
  return tokenizer(s);
}

int32_t id_of(const tokenizer& tok, const std::string& piece) {
  for (int32_t i = 3; i < tok.n_vocab(); ++i) {
    if (tok.token_to_piece(i) == piece) return i;
  }
  ADD_FAILURE() << "no token " << piece;
  return -1;
}

std::vector<std::string> allowed(token_constraint& c, const tokenizer& tok) {
  std::vector<float> logits(static_cast<size_t>(tok.n_vocab()), 0.5f);
  c.mask_logits(logits);
  std::vector<std::string> out;
  for (int32_t i = 3; i < tok.n_vocab(); ++i) {
    if (!std::isinf(logits[static_cast<size_t>(i)])) out.push_back(tok.token_to_piece(i));
  }
  return out;
}

bool allows(token_constraint& c, const tokenizer& tok, const std::string& piece) {
  const auto a = allowed(c, tok);
  return std::find(a.begin(), a.end(), piece) != a.end();
}

// As in the engine, every accept follows a mask (and the token is one it allowed).
void accept(token_constraint& c, const tokenizer& tok, const std::string& piece) {
  ASSERT_TRUE(allows(c, tok, piece)) << piece;
  c.accept(id_of(tok, piece));
}



using strings = std::vector<std::string>;

TEST(ReasoningVocab, TagTokensAndCandidateSets) {
  const tokenizer tok = make_tokenizer(true);
  const reasoning_vocab v(tok);
  EXPECT_TRUE(v.tags_are_text());
  EXPECT_EQ(v.close_tokens(), std::vector<int32_t>{id_of(tok, "</think>")});
  // From "</thin" (6 bytes matched) "k>yes" finishes the tag with content after it.
  EXPECT_EQ(v.straddling(6), std::vector<int32_t>{id_of(tok, "k>yes")});
  EXPECT_EQ(v.straddling(7), std::vector<int32_t>{id_of(tok, ">yes")});
  EXPECT_TRUE(v.straddling(0).empty());
  // A control-token tag never reaches the text.
  EXPECT_FALSE(reasoning_vocab(make_tokenizer(true, 3)).tags_are_text());
}

TEST(ReasoningConstraint, GrammarWaitsForTheEndTagAndSeesTheWholeContent) {
  const tokenizer tok = make_tokenizer(false);
  constraint_compiler cc(tok);
  auto vocab = std::make_shared<const reasoning_vocab>(tok);
  auto c = make_reasoning_constraint(choice_of(cc, {"yes", "no"}), reasoning_start::reasoning, vocab, std::nullopt)->start();
  // Reasoning is free text, and may end.
  EXPECT_TRUE(allows(*c, tok, "a"));
  EXPECT_TRUE(allows(*c, tok, "<"));
  EXPECT_TRUE(c->can_end());
  for (const char* p : {"a", "</", "t", "h", "i", "n"}) accept(*c, tok, p);
  // "</thin": "k>" closes the tag exactly; "k>yes" would carry content past the grammar.
  EXPECT_TRUE(allows(*c, tok, "k>"));
  EXPECT_FALSE(allows(*c, tok, "k>yes"));
  EXPECT_TRUE(allows(*c, tok, ">yes"));  // not a tag: '>' does not continue "</thin"
  accept(*c, tok, "k>");
  EXPECT_EQ(allowed(*c, tok), (strings{"n", "y", "yes", "no"}));
  EXPECT_FALSE(c->can_end());
  EXPECT_FALSE(c->finished());
  accept(*c, tok, "yes");
  EXPECT_TRUE(c->can_end());
  EXPECT_TRUE(c->finished());
}

TEST(ReasoningConstraint, BudgetForcesTheTagToken) {
  const tokenizer tok = make_tokenizer(true);
  constraint_compiler cc(tok);
  auto vocab = std::make_shared<const reasoning_vocab>(tok);
  auto spec = make_reasoning_constraint(choice_of(cc, {"yes", "no"}), reasoning_start::reasoning, vocab, 2);
  auto c = spec->start();
  accept(*c, tok, "a");
  EXPECT_GT(allowed(*c, tok).size(), 10u);
  accept(*c, tok, "b");
  EXPECT_EQ(allowed(*c, tok), strings{"</think>"});
  EXPECT_FALSE(c->can_end());
  accept(*c, tok, "</think>");
  EXPECT_EQ(allowed(*c, tok), (strings{"n", "y", "yes", "no"}));
  // Budget 0: the tag comes first.
  auto zero = make_reasoning_constraint(nullptr, reasoning_start::reasoning, vocab, 0)->start();
  EXPECT_EQ(allowed(*zero, tok), strings{"</think>"});
  accept(*zero, tok, "</think>");
  EXPECT_GT(allowed(*zero, tok).size(), 10u);  // no grammar: the content is free
  EXPECT_TRUE(zero->can_end());
  EXPECT_FALSE(zero->finished());
}

TEST(ReasoningConstraint, BudgetForcesAMultiTokenTagAfterAWholeCharacter) {
  const tokenizer tok = make_tokenizer(false);
  auto vocab = std::make_shared<const reasoning_vocab>(tok);
  ASSERT_TRUE(vocab->tags_are_text());
  ASSERT_GT(vocab->close_tokens().size(), 1u);
  auto c = make_reasoning_constraint(nullptr, reasoning_start::reasoning, vocab, 1)->start();
  c->accept(id_of(tok, "\xC3"));  // the first byte of "é": the budget waits for the second
  EXPECT_GT(allowed(*c, tok).size(), 10u);
  c->accept(id_of(tok, "\xA9"));
  std::string forced;
  for (const int32_t t : vocab->close_tokens()) {
    const auto a = allowed(*c, tok);
    ASSERT_EQ(a, strings{tok.token_to_piece(t)});
    EXPECT_FALSE(c->can_end());
    forced += a[0];
    c->accept(t);
  }
  EXPECT_EQ(forced, "</think>");
  EXPECT_TRUE(c->can_end());
  EXPECT_GT(allowed(*c, tok).size(), 10u);
}

TEST(ReasoningConstraint, OptionalLeadInKeepsTheGrammarAndTheThinkTagOpen) {
  const tokenizer tok = make_tokenizer(true);
  constraint_compiler cc(tok);
  auto vocab = std::make_shared<const reasoning_vocab>(tok);
  auto spec = make_reasoning_constraint(choice_of(cc, {"yes", "no"}), reasoning_start::optional, vocab, std::nullopt);
  auto c = spec->start();
  // The grammar's tokens and those that keep "<think>" possible.
  EXPECT_EQ(allowed(*c, tok), (strings{"n", "y", "yes", "no", "<", "<th", " ", "<think>"}));
  EXPECT_FALSE(c->can_end());
  // The grammar's way: content from the first token.
  accept(*c, tok, "yes");
  EXPECT_TRUE(c->finished());

  // Whitespace the grammar refuses commits the output to "<think>".
  c = spec->start();
  accept(*c, tok, " ");
  EXPECT_EQ(allowed(*c, tok), (strings{"<", "<th", " ", "<think>"}));
  EXPECT_FALSE(c->can_end());
  accept(*c, tok, "<think>");
  EXPECT_TRUE(allows(*c, tok, "a"));
  EXPECT_TRUE(c->can_end());
  accept(*c, tok, "a");
  accept(*c, tok, "</think>");
  EXPECT_EQ(allowed(*c, tok), (strings{"n", "y", "yes", "no"}));  // a fresh grammar
  accept(*c, tok, "no");
  EXPECT_TRUE(c->finished());
}

TEST(ReasoningConstraint, OptionalLeadInThatBothWaysAllowFollowsBoth) {
  const tokenizer tok = make_tokenizer(true);
  constraint_compiler cc(tok);
  auto vocab = std::make_shared<const reasoning_vocab>(tok);
  auto c = make_reasoning_constraint(choice_of(cc, {"<b", "yes"}), reasoning_start::optional, vocab, std::nullopt)->start();
  accept(*c, tok, "<");  // the grammar's and a start of "<think>"
  EXPECT_TRUE(allows(*c, tok, "b"));
  EXPECT_TRUE(allows(*c, tok, "t"));
  accept(*c, tok, "b");  // not "<think>": content, which the grammar has seen whole
  EXPECT_TRUE(c->finished());
}

TEST(ReasoningConstraint, OptionalLeadInWithABudgetAndNoGrammar) {
  const tokenizer tok = make_tokenizer(true);
  auto vocab = std::make_shared<const reasoning_vocab>(tok);
  auto spec = make_reasoning_constraint(nullptr, reasoning_start::optional, vocab, 1);
  auto c = spec->start();
  EXPECT_GT(allowed(*c, tok).size(), 30u);  // free
  accept(*c, tok, "<think>");               // the reasoning begins: its first token spends the budget
  EXPECT_EQ(allowed(*c, tok), strings{"</think>"});
  accept(*c, tok, "</think>");
  EXPECT_GT(allowed(*c, tok).size(), 30u);
  // Content from the first token: the budget never applies.
  c = spec->start();
  accept(*c, tok, "a");
  accept(*c, tok, "b");
  EXPECT_GT(allowed(*c, tok).size(), 30u);
}

}  // namespace
}  // namespace spate::api
