// Distinct items at run time (grammar/distinct_items.h): a matcher and a
// distinct_items follow a text byte by byte, and blocked_tokens names the
// tokens of a small vocabulary that would complete a repeated item.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "grammar/distinct_items.h"
#include "grammar/grammar_builder.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/vocab_trie.h"

namespace spate::grammar {
namespace {

const std::vector<std::string> k_pieces = {
    "\"", "\"a", "\"b", "a", "b", "\",", "\"]", "]", ",", " ", "1", "2", "12", "1,", "1]", ", 1", "[", "{", "}", "x", "\"x\"", " \"a\"", " }",
};

class DistinctItems : public ::testing::Test {
 protected:
  DistinctItems() : trie_(k_pieces) {}

  // The tokens blocked after text (which the grammar must accept), among
  // those the grammar allows there (blocking more is harmless: the mask
  // refuses the others anyway).
  std::vector<std::string> blocked_after(const grammar& g, const std::string& text) {
    auto shared = std::make_shared<const grammar>(g);
    matcher m(shared);
    distinct_items d(shared->distinct_top_level);
    for (const char c : text) {
      EXPECT_TRUE(m.advance(static_cast<uint8_t>(c))) << text;
      d.advance(static_cast<uint8_t>(c), m);
    }
    std::vector<int32_t> ids;
    d.blocked_tokens(trie_, k_pieces, ids);
    std::vector<std::string> out;
    for (const int32_t id : ids) {
      matcher next = m;
      if (next.advance(k_pieces[static_cast<size_t>(id)])) out.push_back(k_pieces[static_cast<size_t>(id)]);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  vocab_trie trie_;
};

using names = std::vector<std::string>;

grammar unique_array(const char* items) {
  return compile_json_schema(boost::json::parse(std::string(R"({"type": "array", "uniqueItems": true, "items": )") + items + "}"));
}

TEST_F(DistinctItems, StringItemCannotCloseAsARepeat) {
  const grammar g = unique_array(R"({"type": "string"})");
  EXPECT_EQ(blocked_after(g, "[\"a\", \"b\", \"a"), (names{"\"", "\",", "\"]"}));
  EXPECT_EQ(blocked_after(g, "[\"a\", \"b\", \"ab"), names{});
  // Between items: tokens that write a whole earlier item (after whitespace).
  EXPECT_EQ(blocked_after(g, "[\"a\","), names{" \"a\""});
  EXPECT_EQ(blocked_after(g, "[\"x\","), names{"\"x\""});
  EXPECT_EQ(blocked_after(g, "["), names{});  // nothing to repeat yet
}

TEST_F(DistinctItems, NumberItemIsBlockedAtItsDelimiter) {
  const grammar g = unique_array(R"({"type": "integer"})");
  // "1" may still become "12": only a delimiter right after it completes the repeat.
  EXPECT_EQ(blocked_after(g, "[1, 2, 1"), (names{" ", ",", ", 1", "]"}));
  EXPECT_EQ(blocked_after(g, "[12, 1"), names{});  // 12 is not 1 followed by a delimiter
  EXPECT_EQ(blocked_after(g, "[1,"), (names{"1,", "1]"}));
  EXPECT_EQ(blocked_after(g, "[12,"), names{});  // "12" then "," writes 12 again only over two tokens
}

TEST_F(DistinctItems, UsedUpChoicesMoveTheDecisionEarlier) {
  // Every unit used with "P": the quote that ends "P" decides a repeat.
  const grammar g = unique_array(
      R"({"type": "object", "properties": {"c": {"type": "string"}, "u": {"enum": ["a", "b"]}}, "required": ["c", "u"]})");
  EXPECT_EQ(blocked_after(g, "[{\"c\": \"P\", \"u\": \"a\"}, {\"c\": \"P\", \"u\": \"b\"}, {\"c\": \"P"),
            (names{"\"", "\","}));
  // One unit left: only that one stays open.
  EXPECT_EQ(blocked_after(g, "[{\"c\": \"P\", \"u\": \"a\"}, {\"c\": \"P"), names{});
  EXPECT_EQ(blocked_after(g, "[{\"c\": \"P\", \"u\": \"a\"}, {\"c\": \"P\", \"u\": \""), names{"a"});
  // An enum used up: no ',' for another item, so the array closes.
  const grammar e = unique_array(R"({"enum": ["a", "b"]})");
  EXPECT_EQ(blocked_after(e, "[\"a\", \"b\""), names{","});
  EXPECT_EQ(blocked_after(e, "[\"a\""), names{});
}

TEST_F(DistinctItems, OnlyDistinctArraysAreChecked) {
  const grammar plain = compile_json_schema(boost::json::parse(R"({"type": "array", "items": {"type": "string"}})"));
  EXPECT_EQ(blocked_after(plain, "[\"a\", \"a"), names{});
  // A distinct array inside a plain one, and a plain one inside a distinct one.
  const grammar nested = compile_json_schema(boost::json::parse(
      R"({"type": "array", "items": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}})"));
  EXPECT_EQ(blocked_after(nested, "[[\"a\"], [\"a"), names{});
  EXPECT_EQ(blocked_after(nested, "[[\"a\"], [\"b\", \"a"), names{});  // "a" is in the other array
  EXPECT_EQ(blocked_after(nested, "[[\"a\"], [\"a\", \"b\", \"a"), (names{"\"", "\",", "\"]"}));
  const grammar outer = compile_json_schema(boost::json::parse(
      R"({"type": "array", "uniqueItems": true, "items": {"type": "array", "items": {"type": "string"}}})"));
  EXPECT_EQ(blocked_after(outer, "[[\"a\", \"a\"], [\"a\", \"a\""), names{"]"});
}

TEST_F(DistinctItems, ObjectsInsideAPropertyAreChecked) {
  const grammar g = compile_json_schema(boost::json::parse(
      R"({"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": true, "items": {"enum": ["a", "b"]}}},
          "required": ["tags"]})"));
  // An enum value is decided at its first letter (the rest is forced): the
  // repeat is refused there, not at the closing quote, which would leave no way on.
  EXPECT_EQ(blocked_after(g, "{\"tags\": [\"a\", \""), names{"a"});
  EXPECT_EQ(blocked_after(g, "{\"tags\": [\"a\","), (names{" \"a\"", "\"a"}));
  EXPECT_EQ(blocked_after(g, "{\"tags\": [\"a\", \"b"), names{});
  EXPECT_EQ(blocked_after(g, "{\"tags\": [\"a\", \"b\"]"), names{});
}

TEST_F(DistinctItems, AnyObjectHasNoKeyTwice) {
  const grammar g = compile_json_object();
  EXPECT_EQ(blocked_after(g, "{\"a\": 1, \"a"), names{"\""});
  EXPECT_EQ(blocked_after(g, "{\"a\": 1,"), names{" \"a\""});
  EXPECT_EQ(blocked_after(g, "{\"a\": {\"a"), names{});        // another object
  EXPECT_EQ(blocked_after(g, "{\"a\": [\"a\", \"a"), names{});  // values are not keys; plain arrays allow repeats
  // A schema's extra properties (additionalProperties) likewise.
  const grammar extra = compile_json_schema(boost::json::parse(R"({"type": "object", "additionalProperties": {"type": "integer"}})"));
  EXPECT_EQ(blocked_after(extra, "{\"b\": 1, \"b"), names{"\""});
}

// Runs text through a matcher and a distinct_items; whether must_end() holds after it.
bool must_end_after(const grammar& g, const std::string& text) {
  auto shared = std::make_shared<const grammar>(g);
  matcher m(shared);
  distinct_items d(shared->distinct_top_level);
  for (const char c : text) {
    EXPECT_TRUE(m.advance(static_cast<uint8_t>(c))) << text;
    d.advance(static_cast<uint8_t>(c), m);
  }
  return d.must_end();
}

TEST_F(DistinctItems, TopLevelValuesOfAToolCallSequence) {
  // hermes-like: markers between top-level objects (tool calls). A repeat is
  // not steered away from (that would invent a call): it ends the output.
  grammar_builder b;
  const alternative call = grammar_builder::literal("<c>") + add_json_object(b) + grammar_builder::literal("</c>");
  const int32_t root = b.add_rule("root", {call + b.repeat(grammar_builder::literal("\n") + call, 0, 3)});
  b.set_distinct_top_level();
  const grammar g = b.finish(root);
  EXPECT_EQ(blocked_after(g, "<c>{\"x\": 1}</c>\n<c>{\"x\": 1"), names{}) << "the repeat may complete";
  EXPECT_FALSE(must_end_after(g, "<c>{\"x\": 1}</c>"));
  EXPECT_FALSE(must_end_after(g, "<c>{\"x\": 1}</c>\n<c>{\"x\": 12}</c>"));
  EXPECT_TRUE(must_end_after(g, "<c>{\"x\": 1}</c>\n<c>{\"x\": 1}"));
  EXPECT_TRUE(must_end_after(g, "<c>{\"x\": 1}</c>\n<c>{\"x\": 1}</c>"));
  // Whitespace outside strings does not make an item different; inside one it does.
  EXPECT_TRUE(must_end_after(g, "<c>{\"x\": 1}</c>\n<c>{ \"x\" :1 }</c>"));
  EXPECT_FALSE(must_end_after(g, "<c>{\"x\": \"a b\"}</c>\n<c>{\"x\": \"a  b\"}</c>"));
}

TEST_F(DistinctItems, ARepeatEndsAListWithRepeatEnds) {
  // An array of objects whose repeats end it (a list of tool calls): the
  // repeat completes, then its ',' is refused, so that the ']' comes next.
  grammar_builder b;
  const alternative obj = add_json_object(b);
  const int32_t array = b.add_helper({grammar_builder::literal("[") + obj + b.repeat(grammar_builder::literal(",") + obj, 0, 7) +
                                      grammar_builder::literal("]")});
  b.set_distinct(array, /*repeat_ends=*/true);
  const grammar g = b.finish(array);
  EXPECT_EQ(blocked_after(g, "[{\"x\": 1},{\"x\": 1"), names{}) << "not steered to another item";
  EXPECT_EQ(blocked_after(g, "[{\"x\": 1},{\"x\": 1}"), (names{","}));
  EXPECT_EQ(blocked_after(g, "[{\"x\": 1},{\"x\": 2}"), names{});
  EXPECT_FALSE(must_end_after(g, "[{\"x\": 1},{\"x\": 1}")) << "only the top level ends the output";
  // Without repeat_ends (uniqueItems) the repeat is refused where it is decided, as before.
  grammar_builder u;
  const alternative uobj = add_json_object(u);
  const int32_t uarray = u.add_helper({grammar_builder::literal("[") + uobj + u.repeat(grammar_builder::literal(",") + uobj, 0, 7) +
                                       grammar_builder::literal("]")});
  u.set_distinct(uarray);
  EXPECT_EQ(blocked_after(u.finish(uarray), "[{\"x\": 1},{\"x\": 1"), (names{" }", "}"}));
}

TEST_F(DistinctItems, ABrokenValueIsDroppedNotMisread) {
  grammar_builder b;
  std::bitset<256> any;
  any.set();
  symbol s;
  s.set = any;
  const int32_t root = b.add_rule("root", {b.repeat({s}, 0, -1)});
  b.set_distinct_top_level();
  const grammar g = b.finish(root);
  // "[x" breaks the array: dropped; the later values are compared as usual.
  EXPECT_FALSE(must_end_after(g, "[x] {\"a\": 1}"));
  EXPECT_TRUE(must_end_after(g, "[x] {\"a\": 1} {\"a\": 1}"));
  // Quotes in text between values open no string.
  EXPECT_TRUE(must_end_after(g, "say \"hi {\"a\": 1} {\"a\": 1}"));
}

}  // namespace
}  // namespace spate::grammar
