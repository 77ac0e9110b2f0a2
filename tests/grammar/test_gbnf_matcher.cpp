// The grammar engine's core without weights: GBNF compiled to the byte-level
// form, and the pushdown matcher accepting and rejecting strings.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"
#include "util/utf8.h"

namespace spate::grammar {
namespace {

std::shared_ptr<const grammar> compile(const std::string& src) { return std::make_shared<const grammar>(parse_gbnf(src)); }

// True when the whole of s is a sentence of g.
bool accepts(const std::shared_ptr<const grammar>& g, const std::string& s) {
  matcher m(g);
  return m.advance(s) && m.can_end();
}

std::string error_of(const std::string& src) {
  try {
    parse_gbnf(src);
  } catch (const grammar_error& e) {
    return e.what();
  }
  return "<no error>";
}

std::string utf8_of(uint32_t cp) {
  std::string out;
  utf8::append(out, cp);
  return out;
}

TEST(Gbnf, LiteralsAlternativesAndGroups) {
  const auto g = compile("root ::= \"a\" (\"b\" | \"cd\") tail\ntail ::= \"!\" | \"\"\n");
  for (const char* s : {"ab", "acd", "ab!", "acd!"}) EXPECT_TRUE(accepts(g, s)) << s;
  for (const char* s : {"", "a", "ac", "abd", "ab!!", "b"}) EXPECT_FALSE(accepts(g, s)) << s;
}

TEST(Gbnf, Repetition) {
  const auto g = compile("root ::= [a-c]+ \"-\" \"x\"{2,3} \"y\"? \"z\"*");
  for (const char* s : {"a-xx", "abc-xxx", "c-xxy", "b-xxzzzz", "aa-xxxyz"}) EXPECT_TRUE(accepts(g, s)) << s;
  for (const char* s : {"-xx", "a-x", "a-xxxx", "a-xxyy", "d-xx"}) EXPECT_FALSE(accepts(g, s)) << s;
  const auto exact = compile("root ::= \"ab\"{3}");
  EXPECT_TRUE(accepts(exact, "ababab"));
  EXPECT_FALSE(accepts(exact, "abab"));
  const auto at_least = compile("root ::= \"a\"{2,}");
  EXPECT_FALSE(accepts(at_least, "a"));
  EXPECT_TRUE(accepts(at_least, std::string(500, 'a')));
}

TEST(Gbnf, LongRightRecursionRunsInBoundedDepth) {
  // x* is right-recursive; tail positions keep the stacks flat.
  const auto g = compile("root ::= item*\nitem ::= \"(\" [0-9]* \")\"");
  std::string s;
  for (int i = 0; i < 5000; ++i) s += "(12)";
  matcher m(g);
  ASSERT_TRUE(m.advance(s));
  EXPECT_TRUE(m.can_end());
  EXPECT_LE(m.n_stacks(), 4u);
}

TEST(Gbnf, JsonLikeGrammarMultiLineRules) {
  const auto g = compile(R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::=
  "{" ws (
    string ":" ws value ws
    ("," ws string ":" ws value ws)*
  )? "}"
array  ::= "[" ws ( value ws ("," ws value ws)* )? "]"
string ::= "\"" ( [^"\\] | "\\" ["\\/bfnrt] )* "\""   # comment
number ::= "-"? [0-9]+ ("." [0-9]+)?
ws     ::= [ \t\n]*
)");
  for (const char* s : {"{}", "{\"a\":1}", "{\"a\": [1, 2.5, -3], \"b\": {\"c\": null}}", "{\"\xC3\xA9\\n\": true}"}) {
    EXPECT_TRUE(accepts(g, s)) << s;
  }
  for (const char* s : {"{", "{\"a\"}", "{\"a\":}", "[1]", "{\"a\":1,}", "{\"a\":01x}"}) EXPECT_FALSE(accepts(g, s)) << s;
}

TEST(Gbnf, CharacterClassesMatchExactlyTheirCodePointsInUtf8) {
  // Brute force over code points around every encoding boundary: the class's
  // verdict equals the range test, and invalid UTF-8 is never accepted.
  const auto g = compile("root ::= [\\u00e0-\\u07ff\\U0001F600-\\U0001F64F] | [^a-z\\u0100-\\uFFFF]");
  auto in_class = [](uint32_t cp) {
    const bool first = (cp >= 0xE0 && cp <= 0x7FF) || (cp >= 0x1F600 && cp <= 0x1F64F);
    const bool second = !(cp >= 'a' && cp <= 'z') && !(cp >= 0x100 && cp <= 0xFFFF);
    return first || second;
  };
  for (uint32_t base : {0x0u, 0x60u, 0x780u, 0x7C0u, 0xD780u, 0xDFC0u, 0xFFC0u, 0x10000u, 0x1F5F0u, 0x10FFC0u}) {
    for (uint32_t cp = base; cp < base + 0x80; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      if (cp > 0x10FFFF) break;
      EXPECT_EQ(accepts(g, utf8_of(cp)), in_class(cp)) << std::hex << cp;
    }
  }
  for (const char* bad : {"\xC0\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\x80", "\xC3"}) EXPECT_FALSE(accepts(g, bad));
}

TEST(Gbnf, EscapesAndAnyCharacter) {
  const auto g = compile("root ::= \"\\x41\\u00e9\\n\\\"\" . [\\]\\-]");
  EXPECT_TRUE(accepts(g, "A\xC3\xA9\n\"\xE2\x82\xAC]"));
  EXPECT_TRUE(accepts(g, "A\xC3\xA9\n\"x-"));
  EXPECT_FALSE(accepts(g, "A\xC3\xA9\n\"x"));
}

TEST(Gbnf, AllowedBytesAndFinish) {
  const auto g = compile("root ::= \"yes\" | \"no\"");
  matcher m(g);
  std::bitset<256> first;
  first.set('y');
  first.set('n');
  EXPECT_EQ(m.allowed_bytes(), first);
  EXPECT_FALSE(m.advance(static_cast<uint8_t>('x')));
  EXPECT_EQ(m.allowed_bytes(), first);  // a refused byte leaves the state as it was
  ASSERT_TRUE(m.advance("no"));
  EXPECT_TRUE(m.finished());
  EXPECT_FALSE(m.advance("!"));
}

TEST(Gbnf, ErrorsSayWhatAndWhere) {
  EXPECT_EQ(error_of("root ::= \"a\"\nroot ::= \"b\""), "line 2, column 10: rule 'root' is defined twice");
  EXPECT_EQ(error_of("root ::= foo"), "rule 'foo' is used but never defined");
  EXPECT_EQ(error_of("start ::= \"a\""), "the grammar has no 'root' rule");
  EXPECT_EQ(error_of("root ::= \"abc"), "line 1, column 14: unterminated string literal");
  EXPECT_EQ(error_of("root ::= [a-"), "line 1, column 13: unexpected end of the grammar");
  EXPECT_EQ(error_of("root ::= [z-a]"), "line 1, column 14: character range is out of order");
  EXPECT_EQ(error_of("root ::= \"a\"{3,2}"), "line 1, column 18: repetition {3,2} has max < min");
  EXPECT_EQ(error_of("root ::= \"a\"{99999}"), "line 1, column 19: repetition bound above 10000");
  EXPECT_EQ(error_of("root ::= (\"a\""), "line 1, column 14: expected ')'");
  EXPECT_EQ(error_of("root ::= \"\\q\""), "line 1, column 13: unknown escape '\\q'");
  EXPECT_EQ(error_of("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\""),
            "rule 'expr' is left-recursive (it can reach itself without consuming input)");
  EXPECT_EQ(error_of("root ::= a\na ::= b? a\nb ::= \"x\""), "rule 'a' is left-recursive (it can reach itself without consuming input)");
  EXPECT_EQ(error_of(std::string(200, '(')), "line 1, column 1: expected a rule name");
  std::string deep = "root ::= ";
  for (int i = 0; i < 150; ++i) deep += "(";
  EXPECT_NE(error_of(deep).find("parentheses nested deeper than 100"), std::string::npos);
}

}  // namespace
}  // namespace spate::grammar
