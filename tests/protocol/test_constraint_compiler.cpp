// Structured outputs compiled into engine constraints over a small real
// vocabulary (SentencePiece words and letters): masks allow exactly the
// tokens that continue the grammar, the automaton follows accepted tokens and
// finishes, compiled grammars are cached, and bad sources give a 400 naming
// the field and the place.
#include <gtest/gtest.h>

#include <cmath>

#include "protocol/constraint_compiler.h"
#include "protocol/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace spate::api {
namespace {

// <unk> <s> </s>, then "a".."z", "ab", "yes", "no", "▁".
tokenizer small_tokenizer() {
  vocab_spec s;
  s.model = "llama";
  s.tokens = {"<unk>", "<s>", "</s>"};
  s.token_types = {2, 3, 3};
  for (char c = 'a'; c <= 'z'; ++c) s.tokens.emplace_back(1, c);
  for (const char* t : {"ab", "yes", "no", "\xE2\x96\x81"}) s.tokens.emplace_back(t);
  s.token_types.resize(s.tokens.size(), 1);
  s.unk_id = 0;
  s.bos_id = 1;
  s.eos_id = 2;
  return tokenizer(s);
}

int32_t id_of(const tokenizer& tok, const std::string& piece) {
  for (int32_t i = 0; i < tok.n_vocab(); ++i) {
    if (tok.token_to_piece(i) == piece) return i;
  }
  return -1;
}

std::vector<std::string> allowed(token_constraint& c, const tokenizer& tok) {
  std::vector<float> logits(static_cast<size_t>(tok.n_vocab()), 0.0f);
  c.mask_logits(logits);
  std::vector<std::string> out;
  for (int32_t i = 0; i < tok.n_vocab(); ++i) {
    if (!std::isinf(logits[static_cast<size_t>(i)])) out.push_back(tok.token_to_piece(i));
  }
  return out;
}

TEST(ConstraintCompiler, ChoiceMasksFollowsAndFinishes) {
  const tokenizer tok = small_tokenizer();
  constraint_compiler cc(tok);
  output_constraint oc;
  oc.type = output_constraint::kind::choice;
  oc.choices = {"yes", "no", "ab"};
  oc.param = "guided_choice";
  std::optional<api_error> err;
  const auto spec = cc.compile(oc, err);
  ASSERT_FALSE(err.has_value());
  auto c = spec->start();
  EXPECT_EQ(allowed(*c, tok), (std::vector<std::string>{"a", "n", "y", "ab", "yes", "no"}));
  EXPECT_FALSE(c->can_end());
  c->accept(id_of(tok, "a"));
  EXPECT_EQ(allowed(*c, tok), (std::vector<std::string>{"b"}));
  c->accept(id_of(tok, "b"));
  EXPECT_TRUE(c->can_end());
  EXPECT_TRUE(c->finished());
  EXPECT_TRUE(allowed(*c, tok).empty());
  // The same constraint again is a cache hit; each request gets its own state.
  const auto again = cc.compile(oc, err);
  EXPECT_EQ(again, spec);
  EXPECT_EQ(cc.stats().n_compiled, 1);
  EXPECT_EQ(cc.stats().n_cache_hits, 1);
  EXPECT_FALSE(again->start()->finished());
}

TEST(ConstraintCompiler, SchemaRegexAndGrammar) {
  const tokenizer tok = small_tokenizer();
  constraint_compiler cc(tok);
  std::optional<api_error> err;
  output_constraint regex;
  regex.type = output_constraint::kind::regex;
  regex.text = "(ab)+c";
  regex.param = "structured_outputs.regex";
  auto c = cc.compile(regex, err)->start();
  EXPECT_EQ(allowed(*c, tok), (std::vector<std::string>{"a", "ab"}));
  output_constraint schema;
  schema.type = output_constraint::kind::json_schema;
  schema.schema = boost::json::parse(R"({"enum": ["no", "yes"]})");
  schema.param = "guided_json";
  c = cc.compile(schema, err)->start();
  ASSERT_FALSE(err.has_value());
  // A JSON string starts with '"', which no token spells: a dead end, so the
  // constraint lets end-of-generation through instead of sampling from nothing.
  EXPECT_TRUE(allowed(*c, tok).empty());
  EXPECT_TRUE(c->can_end());
  EXPECT_FALSE(c->finished());
}

TEST(ConstraintCompiler, ErrorsNameTheFieldAndThePlace) {
  const tokenizer tok = small_tokenizer();
  constraint_compiler cc(tok);
  std::optional<api_error> err;
  output_constraint g;
  g.type = output_constraint::kind::grammar;
  g.text = "root ::= \"a\"\nroot ::= (";
  g.param = "grammar";
  EXPECT_EQ(cc.compile(g, err), nullptr);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->param, "grammar");
  EXPECT_NE(err->message.find("line 2"), std::string::npos) << err->message;
  output_constraint s;
  s.type = output_constraint::kind::json_schema;
  s.schema = boost::json::parse(R"({"type": "object", "properties": {"a": {"not": {}}}})");
  s.param = "response_format.json_schema.schema";
  cc.compile(s, err);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->param, "response_format.json_schema.schema");
  EXPECT_NE(err->message.find("/properties/a: unsupported JSON Schema keyword 'not'"), std::string::npos) << err->message;
  output_constraint r;
  r.type = output_constraint::kind::regex;
  r.text = "a(?=b)";
  r.param = "guided_regex";
  cc.compile(r, err);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->message.find("regex position 1"), std::string::npos) << err->message;
  EXPECT_EQ(cc.stats().n_compiled, 0);
}

}  // namespace
}  // namespace spate::api
