// Constrained decoding of harmony output (protocol/harmony_constraint.h) over
// a small vocabulary with gpt-oss's marker tokens: a response format waits for
// the final message's text, call arguments follow their function's grammar,
// recipients must name an allowed function, tool_choice required masks the
// final channel and refuses to end before a call, markers never enter a
// constrained text, and a reasoning budget closes the analysis message.
#include "protocol/harmony_constraint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "protocol/constraint_compiler.h"
#include "protocol/openai_request.h"
#include "format_test_util.h"
#include "tokenizer/tokenizer.h"

namespace spate::api {
namespace {

using test::choice_of;

// <unk> <s> </s>, a..z, a few words, then harmony's markers (control tokens,
// as in gpt-oss's GGUF; the tokenizer makes the structure ones text).
const tokenizer& harmony_tokenizer() {
  static const tokenizer tok([] {
    vocab_spec s = test::letters_vocab(
        {"yes", "no", "{", "}", "final", "analysis", "commentary", "assistant", "to=", "functions.", "json", "\xe2\x96\x81", ".", "="});
    for (const char* t : {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>", "<|return|>", "<|call|>"}) {
      s.tokens.emplace_back(t);
      s.token_types.push_back(3);
    }
    s.scores.assign(s.tokens.size(), 0.0f);
    return s;
  }());
  return tok;
}

int32_t id_of(const std::string& piece) {
  const tokenizer& tok = harmony_tokenizer();
  for (int32_t i = 3; i < tok.n_vocab(); ++i) {
    if (tok.token_to_piece(i) == piece) return i;
  }
  ADD_FAILURE() << "no token " << piece;
  return -1;
}

bool allows(token_constraint& c, const std::string& piece) {
  std::vector<float> logits(static_cast<size_t>(harmony_tokenizer().n_vocab()), 0.5f);
  c.mask_logits(logits);
  return !std::isinf(logits[static_cast<size_t>(id_of(piece))]);
}

void accept(token_constraint& c, const std::vector<std::string>& pieces) {
  for (const auto& p : pieces) {
    ASSERT_TRUE(allows(c, p)) << p;
    c.accept(id_of(p));
  }
}



std::shared_ptr<const harmony_vocab> vocab() {
  static const auto v = std::make_shared<const harmony_vocab>(harmony_tokenizer());
  return v;
}

const std::vector<std::string> k_analysis = {"<|channel|>", "analysis", "<|message|>", "t", "h", "i", "n", "k", "<|end|>",
                                             "<|start|>", "assistant"};

TEST(HarmonyVocab, MarkersAreText) {
  EXPECT_TRUE(vocab()->markers_are_text());
  std::vector<int32_t> want;
  for (const char* m : {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>"}) want.push_back(id_of(m));
  std::sort(want.begin(), want.end());
  EXPECT_EQ(vocab()->marker_tokens(), want);
  EXPECT_TRUE(harmony_tokenizer().is_eog(harmony_tokenizer().find_token("<|return|>").value()));
  EXPECT_FALSE(harmony_tokenizer().is_eog(id_of("<|end|>")));
}

TEST(HarmonyConstraint, TheAnswerWaitsForTheFinalMessage) {
  constraint_compiler cc(harmony_tokenizer());
  harmony_constraints hc;
  hc.answer = choice_of(cc, {"yes", "no"});
  auto c = make_harmony_constraint(hc, harmony_options{}, vocab())->start();
  // The analysis is free, and the model may stop.
  accept(*c, k_analysis);
  EXPECT_TRUE(c->can_end());
  EXPECT_TRUE(allows(*c, "z"));
  accept(*c, {"<|channel|>", "final"});
  EXPECT_TRUE(allows(*c, "x")) << "the header is free";
  accept(*c, {"<|message|>"});
  // The final message's text: the grammar, no markers.
  EXPECT_TRUE(allows(*c, "yes"));
  EXPECT_TRUE(allows(*c, "n"));
  EXPECT_FALSE(allows(*c, "x"));
  EXPECT_FALSE(allows(*c, "<|end|>"));
  EXPECT_FALSE(c->can_end());
  accept(*c, {"yes"});
  EXPECT_TRUE(c->can_end());
  EXPECT_TRUE(c->finished());
}

TEST(HarmonyConstraint, APreambleIsNotTheAnswer) {
  constraint_compiler cc(harmony_tokenizer());
  harmony_constraints hc;
  hc.answer = choice_of(cc, {"yes"});
  auto c = make_harmony_constraint(hc, harmony_options{}, vocab())->start();
  accept(*c, {"<|channel|>", "commentary", "<|message|>", "x", "<|end|>", "<|start|>", "assistant", "<|channel|>", "final",
              "<|message|>"});
  EXPECT_FALSE(allows(*c, "x"));
  EXPECT_TRUE(allows(*c, "yes"));
}

TEST(HarmonyConstraint, CallArgumentsAndRecipients) {
  constraint_compiler cc(harmony_tokenizer());
  harmony_constraints hc;
  hc.calls = {{"f", choice_of(cc, {"{}"})}, {"go", nullptr}};
  auto c = make_harmony_constraint(hc, harmony_options{}, vocab())->start();
  accept(*c, k_analysis);
  accept(*c, {"<|channel|>", "commentary", " ", "to=", "functions."});
  EXPECT_TRUE(allows(*c, "f"));
  EXPECT_TRUE(allows(*c, "g"));
  EXPECT_FALSE(allows(*c, "h")) << "not an allowed function";
  EXPECT_FALSE(allows(*c, "<|message|>")) << "\"functions.\" names none";
  accept(*c, {"f"});
  EXPECT_FALSE(allows(*c, "x")) << "functions.fx is not allowed";
  EXPECT_TRUE(allows(*c, " "));
  accept(*c, {" ", "<|constrain|>", "json", "<|message|>"});
  // f's arguments: its grammar; the call cannot end before it does.
  EXPECT_TRUE(allows(*c, "{"));
  EXPECT_FALSE(allows(*c, "x"));
  EXPECT_FALSE(c->can_end());
  accept(*c, {"{", "}"});
  EXPECT_TRUE(c->can_end());
  // A wrong recipient in the role part is masked as well.
  auto d = make_harmony_constraint(hc, harmony_options{}, vocab())->start();
  accept(*d, {" ", "to=", "functions.", "g"});
  EXPECT_TRUE(allows(*d, "o"));
  EXPECT_FALSE(allows(*d, "<|channel|>")) << "functions.g is not go";
  accept(*d, {"o", "<|channel|>", "commentary", "<|message|>"});
  EXPECT_TRUE(allows(*d, "x")) << "go has no grammar: any arguments";
}

TEST(HarmonyConstraint, ARequiredCallMasksTheFinalChannelAndTheEnd) {
  harmony_constraints hc;
  hc.calls = {{"f", nullptr}};
  hc.call_required = true;
  auto c = make_harmony_constraint(hc, harmony_options{}, vocab())->start();
  EXPECT_FALSE(c->can_end());
  accept(*c, {"<|channel|>"});
  EXPECT_FALSE(allows(*c, "final"));
  EXPECT_FALSE(allows(*c, "f"));
  EXPECT_TRUE(allows(*c, "analysis"));
  EXPECT_TRUE(allows(*c, "commentary"));
  accept(*c, {"commentary", "<|message|>", "o", "k", "<|end|>"});  // a preamble may come first
  EXPECT_FALSE(c->can_end());
  accept(*c, {"<|start|>", "assistant", " ", "to=", "functions.", "f", "<|channel|>", "commentary", "<|message|>"});
  EXPECT_TRUE(c->can_end());
}

TEST(HarmonyConstraint, AnOpenFinalMessageIsConstrainedFromTheFirstToken) {
  constraint_compiler cc(harmony_tokenizer());
  harmony_constraints hc;
  hc.answer = choice_of(cc, {"yes"});
  harmony_options start;
  start.open_header = "assistant<|channel|>final";
  auto c = make_harmony_constraint(hc, start, vocab())->start();
  EXPECT_TRUE(allows(*c, "yes"));
  EXPECT_FALSE(allows(*c, "<|channel|>"));
  EXPECT_FALSE(allows(*c, "x"));
}

// The forced tokens, in order, each the only one allowed.
void expect_forced(token_constraint& c, const std::vector<std::string>& pieces) {
  for (const auto& p : pieces) {
    std::vector<float> logits(static_cast<size_t>(harmony_tokenizer().n_vocab()), 0.5f);
    c.mask_logits(logits);
    const auto n_allowed = std::count_if(logits.begin(), logits.end(), [](float v) { return !std::isinf(v); });
    EXPECT_EQ(n_allowed, 1) << p;
    EXPECT_FALSE(std::isinf(logits[static_cast<size_t>(id_of(p))])) << p;
    EXPECT_FALSE(c.can_end()) << p;
    c.accept(id_of(p));
  }
}

std::vector<std::string> close_pieces() {
  std::vector<std::string> out;
  for (const int32_t id : vocab()->close_tokens()) out.push_back(harmony_tokenizer().token_to_piece(id, true));
  return out;
}

TEST(HarmonyConstraint, ABudgetClosesTheAnalysisAndTheAnswerFollows) {
  constraint_compiler cc(harmony_tokenizer());
  harmony_constraints hc;
  hc.answer = choice_of(cc, {"yes", "no"});
  hc.reasoning_budget = 3;
  auto c = make_harmony_constraint(hc, harmony_options{}, vocab())->start();
  accept(*c, {"<|channel|>", "analysis", "<|message|>", "t", "h"});
  EXPECT_TRUE(allows(*c, "z")) << "two tokens of a budget of three";
  accept(*c, {"i"});
  const std::vector<std::string> close = close_pieces();
  ASSERT_FALSE(close.empty());
  EXPECT_EQ(close.front(), "<|end|>");
  EXPECT_EQ(close.back(), "<|message|>");
  expect_forced(*c, close);
  // The final message's text: the grammar.
  EXPECT_TRUE(allows(*c, "yes"));
  EXPECT_FALSE(allows(*c, "x"));
  accept(*c, {"no"});
  EXPECT_TRUE(c->finished());
}

TEST(HarmonyConstraint, ABudgetOfZeroClosesEveryAnalysisMessageAtOnce) {
  harmony_constraints hc;
  hc.reasoning_budget = 0;
  auto c = make_harmony_constraint(hc, harmony_options{}, vocab())->start();
  // Headers and other channels are free.
  EXPECT_TRUE(allows(*c, "x"));
  accept(*c, {"<|channel|>", "analysis", "<|message|>"});
  expect_forced(*c, close_pieces());
  EXPECT_TRUE(allows(*c, "x")) << "no grammar: the final text is free";
  EXPECT_TRUE(c->can_end());
  accept(*c, {"x", "<|end|>", "<|start|>", "assistant", "<|channel|>", "analysis", "<|message|>"});
  expect_forced(*c, close_pieces());
}

TEST(HarmonyConstraint, ABudgetCountsOnlyAnalysisText) {
  harmony_constraints hc;
  hc.reasoning_budget = 1;
  auto c = make_harmony_constraint(hc, harmony_options{}, vocab())->start();
  // Commentary text does not count.
  accept(*c, {"<|channel|>", "commentary", "<|message|>", "x", "y", "<|end|>", "<|start|>", "assistant", "<|channel|>",
              "analysis", "<|message|>"});
  EXPECT_TRUE(allows(*c, "z"));
  accept(*c, {"z"});
  expect_forced(*c, close_pieces());
}

TEST(HarmonyConstraint, AnOpenAnalysisMessageWithABudgetOfZeroIsClosedFirst) {
  harmony_constraints hc;
  hc.reasoning_budget = 0;
  harmony_options start;
  start.open_header = "assistant<|channel|>analysis";
  auto c = make_harmony_constraint(hc, start, vocab())->start();
  expect_forced(*c, close_pieces());
}

}  // namespace
}  // namespace spate::api
