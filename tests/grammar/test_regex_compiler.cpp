// The regular-expression front end: patterns compiled to the byte-level form
// and run through the matcher (full matching), in raw and json_string spelling;
// errors with positions; bounds; and a cross-check against Python's re.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grammar/grammar_builder.h"
#include "grammar/matcher.h"
#include "grammar/regex_compiler.h"

namespace spate::grammar {
namespace {

using namespace std::string_view_literals;

std::shared_ptr<const grammar> compile(std::string_view pattern) {
  return std::make_shared<const grammar>(compile_regex(pattern));
}

// The grammar "<prefix>" regex(pattern, json_string) "<suffix>", validated.
std::shared_ptr<const grammar> compile_json(std::string_view pattern, std::string_view prefix = "",
                                            std::string_view suffix = "") {
  grammar_builder b;
  const alternative body = add_regex(b, pattern, regex_text::json_string);
  const int32_t root = b.add_rule("root", {grammar_builder::literal(prefix) + body + grammar_builder::literal(suffix)});
  return std::make_shared<const grammar>(b.finish(root));
}

// True when the whole of s is a sentence of g.
bool accepts(const std::shared_ptr<const grammar>& g, std::string_view s) {
  matcher m(g);
  return m.advance(s) && m.can_end();
}

std::string error_of(std::string_view pattern) {
  try {
    compile_regex(pattern);
  } catch (const grammar_error& e) {
    return e.what();
  }
  return "<no error>";
}

// pattern accepts every string of yes and none of no.
void expect_language(std::string_view pattern, const std::vector<std::string_view>& yes,
                     const std::vector<std::string_view>& no) {
  SCOPED_TRACE(std::string("pattern ") + std::string(pattern));
  const auto g = compile(pattern);
  for (const auto s : yes) EXPECT_TRUE(accepts(g, s)) << "should accept '" << s << "'";
  for (const auto s : no) EXPECT_FALSE(accepts(g, s)) << "should reject '" << s << "'";
}

TEST(Regex, LiteralsAndEmptyPattern) {
  expect_language("abc", {"abc"}, {"", "ab", "abcd", "abd", "ABC"});
  expect_language("", {""}, {"a", " "});
  expect_language("héllo wörld 😀", {"héllo wörld 😀"}, {"hello world", "héllo wörld"});
  expect_language("a b\tc", {"a b\tc"}, {"ab\tc", "a bc"});
  expect_language("]}", {"]}"}, {"]", "}"});
}

TEST(Regex, Alternation) {
  expect_language("cat|dog|", {"cat", "dog", ""}, {"catdog", "ca", "do", "cats"});
  expect_language("a|ab|abc", {"a", "ab", "abc"}, {"abcd", "b", ""});
  expect_language("x(?:|y|zz)w", {"xw", "xyw", "xzzw"}, {"xzw", "xyyw"});
}

TEST(Regex, NestedAndNamedGroups) {
  expect_language("(a(b|c)+)?d", {"d", "abd", "acbcd"}, {"ad", "abc", "abdd"});
  expect_language("(?:x(?:y|z){2})+", {"xyy", "xyzxzz", "xzyxyyxzz"}, {"", "xy", "xyzx", "xyyy"});
  expect_language(R"((?P<year>\d{4})-(?<month>\d\d))", {"2024-05", "0000-99"}, {"2024-5", "202-05", "2024_05"});
  expect_language("((((a))))", {"a"}, {"", "aa"});
  expect_language("(?:)", {""}, {"a"});
  expect_language("a(?#a comment)b(?#another)", {"ab"}, {"a", "acommentb"});
  expect_language("a(?#x)*", {"", "a", "aaa"}, {"x", "ax"});  // the quantifier applies to 'a', as in Python
}

TEST(Regex, Quantifiers) {
  expect_language("a*", {"", "a", "aaaa"}, {"b", "ab"});
  expect_language("a+", {"a", "aaaa"}, {"", "b"});
  expect_language("a?b", {"b", "ab"}, {"aab", "a"});
  expect_language("a{3}", {"aaa"}, {"aa", "aaaa"});
  expect_language("a{2,}", {"aa", "aaaaaaa"}, {"a", ""});
  expect_language("a{2,4}", {"aa", "aaa", "aaaa"}, {"a", "aaaaa"});
  expect_language("a{,2}", {"", "a", "aa"}, {"aaa"});
  expect_language("a{,}", {"", "a", "aaaaa"}, {"b"});
  expect_language("a{0}b", {"b"}, {"ab"});
  expect_language("(ab){2}c{1,2}", {"ababc", "ababcc"}, {"abc", "ababccc", "abababc"});
  // Lazy forms match the same strings.
  expect_language("a*?b+?c??d{1,2}?e{2}?f{1,}?", {"bdeef", "aabbcddeefff"}, {"adeef", "bcdeef" "x", "bccdeef"});
}

TEST(Regex, BraceThatIsNotAQuantifierIsALiteral) {
  expect_language("a{", {"a{"}, {"a"});
  expect_language("a{}", {"a{}"}, {"a"});
  expect_language("a{x}", {"a{x}"}, {"ax"});
  expect_language("a{1,b}", {"a{1,b}"}, {"a"});
  expect_language("a{ 1}", {"a{ 1}"}, {"a"});
  expect_language("{", {"{"}, {""});
  expect_language("{abc}", {"{abc}"}, {"abc"});
  expect_language("x{,", {"x{,"}, {"x"});
  expect_language("a{2}{x", {"aa{x"}, {"aax"});
}

TEST(Regex, Escapes) {
  expect_language(R"(\d\D\w\W\s\S)", {"1a_! x", "9-Z\x01\tq"}, {"a1_! x", "11_! x", "1a!! x", "1a_!xx", "1a_! \n"});
  expect_language(R"(\n\t\r\f\v\a)", {"\n\t\r\f\v\a"}, {"ntrfva"});
  expect_language(R"(\x41\x7e\u00e9\u4E2D\U0001F600)", {"A~é中😀"}, {"x41"});
  expect_language(R"(\0\101\08\07)", {"\0A\08\7"sv}, {"0A08"});
  expect_language(R"(\.\*\\\(\)\[\]\{\}\-\/\|\$\^\?\+\ \#\&\~\")", {".*\\()[]{}-/|$^?+ #&~\""}, {"x"});
  expect_language(R"(\é\😀)", {"é😀"}, {"\\é😀"});
  // ASCII semantics: digits, word characters and spaces outside ASCII are not in \d \w \s.
  expect_language(R"(\d+)", {"0123456789"}, {"٣", "12a"});
  expect_language(R"(\w+)", {"aZ_09"}, {"é", "a-b"});
  expect_language(R"(\s+)", {" \t\n\r\f\v"}, {"\u00a0", "\x1c"});
  expect_language(R"(\W\S\D)", {"ééé", "-!x"}, {"_xx", "- x", "-x1"});
}

TEST(Regex, Dot) {
  expect_language(".", {"a", "é", "😀", "\r", "\t", "\x7f", std::string_view("\0", 1)}, {"\n", "", "ab"});
  expect_language(".+", {"any thing at all ✓"}, {"two\nlines"});
}

TEST(Regex, Classes) {
  expect_language("[a-c]+", {"abcba"}, {"abd", ""});
  expect_language("[^a-c]", {"d", "\n", "é", "😀"}, {"a", "b", "c", ""});
  expect_language("[]a]+", {"]a]"}, {"b"});
  expect_language("[^]a]", {"b", "["}, {"]", "a"});
  expect_language("[-a][a-]", {"-a", "a-", "--"}, {"ab", "b-"});
  expect_language("[a-c-e]", {"a", "b", "-", "e"}, {"d"});
  expect_language(R"([\d.]+)", {"3.14"}, {"3,14"});
  expect_language(R"([\w-]+)", {"foo-bar_1"}, {"foo bar"});
  expect_language(R"([\]\\\-\^]+)", {"]\\-^"}, {"a"});
  expect_language(R"([\b])", {"\b"}, {"b"});
  expect_language("[.*+?(){}|^$]+", {".*+?(){}|^$"}, {"a"});
  expect_language("[[]", {"["}, {"]"});
  expect_language(R"([\x00-\x1f])", {"\x01", "\x1f", std::string_view("\0", 1)}, {" "});
  expect_language(R"([\s\S]*)", {"", "a\nb", "é😀"}, {});
  expect_language(R"([^\d\s])", {"a", "é"}, {"1", " "});
  expect_language(R"([\D])", {"a"}, {"1"});
}

TEST(Regex, UnicodeClasses) {
  expect_language("[à-ÿ]+", {"àéÿ"}, {"a", "Ā", "ß"});  // ß is U+00DF, below à (U+00E0)
  expect_language("[α-ω]{2,3}", {"αβ", "ωωω"}, {"α", "αβγδ", "ab"});
  expect_language(R"([\u4e00-\u9fff]+)", {"中文字"}, {"中a", "ぁ"});
  expect_language("[😀-🙏]", {"😀", "🙏", "🙂"}, {"😐a", "🚀"});
  expect_language(R"([^\x00-\x7f]+)", {"é中😀", "\u0080", "\U0010FFFF"}, {"aé", ""});
  expect_language(R"([\U00010000-\U0010FFFF])", {"😀", "\U0010FFFF"}, {"\uFFFF", "a"});
  expect_language("[ä-ä]", {"ä"}, {"a"});
}

TEST(Regex, Anchors) {
  expect_language("^abc$", {"abc"}, {"", "^abc$"});
  expect_language("^$", {""}, {"a"});
  expect_language("$", {""}, {"$"});
  expect_language("^", {""}, {"^"});
  expect_language(R"(a\$)", {"a$"}, {"a"});
  expect_language(R"(a\\$)", {"a\\"}, {"a\\$"});
  expect_language("a|b$", {"a", "b"}, {"a|b"});
}

// A star over something that matches "" must not become a left-recursive rule
// (validate() rejects those); the language must still be right.
TEST(Regex, StarOverNullableAtoms) {
  expect_language("(a*)*", {"", "a", "aaaa"}, {"b"});
  expect_language("(a?)*b", {"b", "aab"}, {"ba"});
  expect_language("(a*b*)*", {"", "abba", "bbbaaab"}, {"c"});
  expect_language("(|a)+", {"", "a", "aaa"}, {"b"});
  expect_language("()*", {""}, {"a"});
  expect_language("(?:)+x", {"x"}, {"", "xx"});
  expect_language("(a*){2,}", {"", "aaa"}, {"b"});
  expect_language("((a|)*)*", {"", "aa"}, {"b"});
  expect_language("(a{0})*c", {"c"}, {"ac"});
  expect_language("(a*|b)+", {"", "abba", "bbb"}, {"c"});
  expect_language("(a?b?c?)*d", {"d", "cbad", "abcabcd"}, {"dd"});
  expect_language("((a?){2}b?)*", {"", "aab", "ba"}, {"c"});
  expect_language("(a?){3}", {"", "a", "aaa"}, {"aaaa"});
  expect_language("(?:(?:a*)*)*", {"", "aaaa"}, {"b"});
  expect_language("(a*(b|c?))*d", {"d", "abacd", "ccd"}, {"da"});
}

// Every node derives "" in one way only, so nested repeats of nullable groups
// do not multiply the matcher's parses (these once exceeded k_max_stacks).
TEST(Regex, NestedNullableRepeatsStayFewParses) {
  expect_language(R"(\n.+|(?:(?:|\n?\W*){1,3}){1,3})", {"\n 1c\"a", "\n", "", " \n!"}, {"a", "\n\na"});
  expect_language("((a?b?){1,4}c?){1,4}", {"", "abcabcabcabc", "bbbbbb"}, {"abcabcabcabcabc", "d"});
  const auto g = compile("(((a?)*b?){0,5}c?)+");
  matcher m(g);
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(m.advance(std::string_view(i % 3 == 2 ? "c" : "a"))) << i;
    EXPECT_LE(m.n_stacks(), 64u) << i;
  }
  EXPECT_TRUE(m.can_end());
}

TEST(Regex, BoundsAtTheLimit) {
  const auto g = compile("a{10000}");
  EXPECT_TRUE(accepts(g, std::string(10000, 'a')));
  EXPECT_FALSE(accepts(g, std::string(9999, 'a')));
  EXPECT_FALSE(accepts(g, std::string(10001, 'a')));
  const auto opt = compile("b{0,10000}");
  EXPECT_TRUE(accepts(opt, std::string(10000, 'b')));
  EXPECT_FALSE(accepts(opt, std::string(10001, 'b')));
  EXPECT_EQ(error_of("a{10001}"), "regex position 1: repetition bound above 10000");
  EXPECT_EQ(error_of("a{1,10001}"), "regex position 1: repetition bound above 10000");
  EXPECT_EQ(error_of("a{99999999999999999999}"), "regex position 1: repetition bound above 10000");

  std::string deep(k_max_nesting, '(');
  deep += "a" + std::string(k_max_nesting, ')');
  expect_language(deep, {"a"}, {""});
  EXPECT_EQ(error_of("(" + deep + ")"), "regex position 100: groups nested deeper than 100");

  const std::string longest(k_max_regex_bytes, 'x');
  EXPECT_TRUE(accepts(compile(longest), longest));
  EXPECT_EQ(error_of(longest + "x"), "regex position 0: the pattern is longer than 65536 bytes");

  // The builder's rule bound, reported with the position of the repetition.
  std::string many = "x";
  for (int i = 0; i < 7; ++i) many += "a{0,10000}";
  const std::string err = error_of(many);
  EXPECT_NE(err.find("regex position 62: "), std::string::npos) << err;
  EXPECT_NE(err.find("rules"), std::string::npos) << err;
}

TEST(Regex, ErrorsNamePositions) {
  const std::vector<std::pair<std::string_view, std::string_view>> cases = {
      {"a**", "regex position 2: multiple repeat"},
      {"a{2}{3}", "regex position 4: multiple repeat"},
      {"a*?+", "regex position 3: multiple repeat"},
      {"*a", "regex position 0: nothing to repeat"},
      {"a|+", "regex position 2: nothing to repeat"},
      {"(?:*)", "regex position 3: nothing to repeat"},
      {"{1}", "regex position 0: nothing to repeat"},
      {"^*", "regex position 1: nothing to repeat"},
      {"a*+", "regex position 2: possessive quantifiers are not supported"},
      {"a{1,2}+", "regex position 6: possessive quantifiers are not supported"},
      {"(a", "regex position 0: missing ), unterminated subpattern"},
      {"a(b(c)", "regex position 1: missing ), unterminated subpattern"},
      {"a)", "regex position 1: unbalanced parenthesis"},
      {"[a", "regex position 0: unterminated character class"},
      {"[]", "regex position 0: unterminated character class"},
      {"[z-a]", "regex position 1: bad character range z-a"},
      {R"([\d-z])", R"(regex position 1: bad character range \d-z)"},
      {R"([a-\w])", R"(regex position 1: bad character range a-\w)"},
      {"x{3,2}", "regex position 1: min repeat greater than max repeat"},
      {R"((a)\1)", "regex position 3: backreferences are not supported"},
      {"(?P<n>a)(?P=n)", "regex position 8: backreferences (?P=name) are not supported"},
      {"a(?=b)", "regex position 1: lookahead assertions are not supported"},
      {"a(?!b)", "regex position 1: lookahead assertions are not supported"},
      {"(?<=a)b", "regex position 0: lookbehind assertions are not supported"},
      {"(?<!a)b", "regex position 0: lookbehind assertions are not supported"},
      {"(?i)abc", "regex position 0: inline flags (?flags) are not supported"},
      {"(?s:.)", "regex position 0: inline flags (?flags) are not supported"},
      {"(?-i:a)", "regex position 0: inline flags (?flags) are not supported"},
      {"(?>a)", "regex position 0: atomic groups are not supported"},
      {"(a)(?(1)b|c)", "regex position 3: conditional groups are not supported"},
      {"(?Px)", "regex position 0: unknown extension (?P"},
      {"(?", "regex position 0: unknown extension (?"},
      {R"(\bfoo)", R"(regex position 0: \b (word boundary) is not supported)"},
      {R"(a\B)", R"(regex position 1: anchor \B is not supported)"},
      {R"(\Aa)", R"(regex position 0: anchor \A is not supported)"},
      {R"(a\Z)", R"(regex position 1: anchor \Z is not supported)"},
      {"a^b", "regex position 1: anchor '^' is only supported at the start of the pattern"},
      {"a$b", "regex position 1: anchor '$' is only supported at the end of the pattern"},
      {"(a$)", "regex position 2: anchor '$' is only supported at the end of the pattern"},
      {"^^a", "regex position 1: anchor '^' is only supported at the start of the pattern"},
      {R"(\q)", R"(regex position 0: bad escape \q)"},
      {R"([\A])", R"(regex position 1: bad escape \A)"},
      {R"([\8])", R"(regex position 1: bad escape \8)"},
      {"ab\\", "regex position 2: bad escape (end of pattern)"},
      {R"(a\x4)", "regex position 1: incomplete escape: expected 2 hex digits"},
      {R"(\u12G4)", "regex position 0: incomplete escape: expected 4 hex digits"},
      {R"(\U00110000)", "regex position 0: escape above U+10FFFF"},
      {R"(\477)", "regex position 0: octal escape outside of range 0-0o377"},
      {R"(\N{DASH})", R"(regex position 0: named characters \N{...} are not supported)"},
      {R"(\p{L}+)", R"(regex position 0: Unicode property classes \p{...} are not supported)"},
      {R"(x\ud800)", "regex position 1: a surrogate code point cannot occur in UTF-8 text"},
      {R"([^\s\S])", "regex position 0: the character class matches no character"},
      {R"([\ud800-\udfff])", "regex position 0: the character class matches no character"},
      {"ab\xff", "regex position 2: invalid UTF-8 in the pattern"},
      {"a\xc3", "regex position 1: invalid UTF-8 in the pattern"},
      {"\xed\xa0\x80", "regex position 0: invalid UTF-8 in the pattern"},  // an encoded surrogate
      {"(?P<1a>x)", "regex position 4: bad character in group name '1a'"},
      {"(?<>x)", "regex position 3: bad character in group name ''"},
      {"(?P<a>x)(?P<a>y)", "regex position 12: redefinition of group name 'a'"},
      {"(?P<a", "regex position 4: missing >, unterminated name"},
      {"a(?#abc", "regex position 1: missing ), unterminated comment"},
  };
  for (const auto& [pattern, message] : cases) EXPECT_EQ(error_of(pattern), message) << pattern;
}

TEST(Regex, JsonStringSpelling) {
  // '"' is written \" inside the JSON string.
  const auto quote = compile_json(R"(a"b)");
  EXPECT_TRUE(accepts(quote, R"(a\"b)"));
  EXPECT_FALSE(accepts(quote, R"(a"b)"));
  EXPECT_FALSE(accepts(quote, R"(a\\"b)"));
  // A literal backslash is written \\ .
  const auto backslash = compile_json(R"(x\\y)");
  EXPECT_TRUE(accepts(backslash, R"(x\\y)"));
  EXPECT_FALSE(accepts(backslash, R"(x\y)"));
  // A negated class holds '"', '\\', controls and '/': all their spellings.
  const auto not_a = compile_json("[^a]");
  for (const auto s : {R"(\")", R"(\\)", R"(\n)", R"(\u000a)", R"(\u000A)", R"(\t)", R"(\u0009)", R"(\b)",
                       R"(\f)", R"(\r)", R"(\u0000)", R"(\u001f)", R"(\u001F)", "/", R"(\/)", "b", "é", "😀", "\x7f"}) {
    EXPECT_TRUE(accepts(not_a, s)) << s;
  }
  for (const auto s : {"\n", "\"", "\\", "a", R"(\a)", R"(\u0020)", R"(\u00e9)", R"(\U000a)", "\x1f", R"(\x)"}) {
    EXPECT_FALSE(accepts(not_a, s)) << s;
  }
  // '.' excludes only the newline, in every spelling.
  const auto dot = compile_json(".");
  for (const auto s : {"x", R"(\t)", R"(\u0009)", R"(\r)", R"(\")", R"(\u001b)", "é"}) EXPECT_TRUE(accepts(dot, s)) << s;
  for (const auto s : {R"(\n)", R"(\u000a)", R"(\u000A)", "\t", "\""}) EXPECT_FALSE(accepts(dot, s)) << s;
  // Controls without a short form: only \u00XX.
  const auto ctl = compile_json(R"(\x01\x1f)");
  EXPECT_TRUE(accepts(ctl, R"(\u0001\u001f)"));
  EXPECT_TRUE(accepts(ctl, R"(\u0001\u001F)"));
  EXPECT_FALSE(accepts(ctl, "\x01\x1f"));
  // A newline literal: \n or \u000a, never raw.
  const auto nl = compile_json(R"(a\nb)");
  EXPECT_TRUE(accepts(nl, R"(a\nb)"));
  EXPECT_TRUE(accepts(nl, R"(a\u000ab)"));
  EXPECT_FALSE(accepts(nl, "a\nb"));
  // '/' raw or escaped; ordinary text raw.
  const auto slash = compile_json(R"(\d+/\w+)");
  EXPECT_TRUE(accepts(slash, "12/ab"));
  EXPECT_TRUE(accepts(slash, R"(12\/ab)"));
  EXPECT_FALSE(accepts(slash, "12\\ab"));
  // A class of only plain characters takes no escapes; one of only controls takes no raw bytes.
  const auto plain = compile_json(R"([^\x00-\x1f"\\]+)");
  EXPECT_TRUE(accepts(plain, "abc/é"));
  EXPECT_TRUE(accepts(plain, R"(\/)"));  // '/' is in the class
  for (const auto s : {R"(\")", R"(\\)", R"(\n)", R"(\u0041)"}) EXPECT_FALSE(accepts(plain, s)) << s;
  const auto controls = compile_json(R"([\x00-\x1f]+)");
  EXPECT_TRUE(accepts(controls, R"(\u0000\b\f\n\r\t\u001F\u000b)"));
  EXPECT_FALSE(accepts(controls, "\t"));
  EXPECT_FALSE(accepts(controls, R"(\u0020)"));
  // Quantified and alternated escapes.
  const auto quotes = compile_json(R"(("|\\){2,3})");
  EXPECT_TRUE(accepts(quotes, R"(\"\\)"));
  EXPECT_TRUE(accepts(quotes, R"(\\\\\")"));
  EXPECT_FALSE(accepts(quotes, R"(\")"));
  EXPECT_FALSE(accepts(quotes, R"(\"\"\"\")"));
  // Embedded between the quotes of a JSON string, as a JSON Schema front end would.
  const auto quoted = compile_json(R"([^"]*"[a-z]+")", "\"", "\"");
  EXPECT_TRUE(accepts(quoted, R"("say \"hi\"")"));
  EXPECT_TRUE(accepts(quoted, R"("x\\y \"z\"")"));
  EXPECT_FALSE(accepts(quoted, R"("say "hi"")"));
  EXPECT_FALSE(accepts(quoted, R"("say \"hi\")"));
}

TEST(Regex, AddRegexAppendsToAnExistingBuilder) {
  grammar_builder b;
  const int32_t digits = b.add_rule("digits", {b.repeat(b.code_points({{'0', '9'}}), 1, -1)});
  const alternative word = add_regex(b, "[a-z]+(-[a-z]+)*");
  const alternative star = add_regex(b, "(x*)*");
  const int32_t root = b.add_rule("root", {alternative{ref(digits)} + grammar_builder::literal(":") + word + star});
  const auto g = std::make_shared<const grammar>(b.finish(root));
  EXPECT_TRUE(accepts(g, "42:foo-bar"));
  EXPECT_TRUE(accepts(g, "42:foo-barxxx"));
  EXPECT_FALSE(accepts(g, "42:foo-"));
  EXPECT_FALSE(accepts(g, ":foo"));
}

// Generated with Python 3.11:  re.fullmatch(pattern, s, re.ASCII)  (ASCII
// semantics for \d \w \s, as documented). Every string over {a, b, c} of at
// most 5 characters that the pattern accepts; all others are rejected.
struct exhaustive_case {
  std::string_view pattern;
  std::vector<std::string_view> accepted;
};
const std::vector<exhaustive_case> k_exhaustive = {
    {"(a|b)*c"sv,
     {"c"sv, "ac"sv, "bc"sv, "aac"sv, "abc"sv, "bac"sv, "bbc"sv, "aaac"sv, "aabc"sv, "abac"sv, "abbc"sv,
         "baac"sv, "babc"sv, "bbac"sv, "bbbc"sv, "aaaac"sv, "aaabc"sv, "aabac"sv, "aabbc"sv, "abaac"sv,
         "ababc"sv, "abbac"sv, "abbbc"sv, "baaac"sv, "baabc"sv, "babac"sv, "babbc"sv, "bbaac"sv, "bbabc"sv,
         "bbbac"sv, "bbbbc"sv}},
    {"(a*b*)*"sv,
     {""sv, "a"sv, "b"sv, "aa"sv, "ab"sv, "ba"sv, "bb"sv, "aaa"sv, "aab"sv, "aba"sv, "abb"sv, "baa"sv,
         "bab"sv, "bba"sv, "bbb"sv, "aaaa"sv, "aaab"sv, "aaba"sv, "aabb"sv, "abaa"sv, "abab"sv, "abba"sv,
         "abbb"sv, "baaa"sv, "baab"sv, "baba"sv, "babb"sv, "bbaa"sv, "bbab"sv, "bbba"sv, "bbbb"sv, "aaaaa"sv,
         "aaaab"sv, "aaaba"sv, "aaabb"sv, "aabaa"sv, "aabab"sv, "aabba"sv, "aabbb"sv, "abaaa"sv, "abaab"sv,
         "ababa"sv, "ababb"sv, "abbaa"sv, "abbab"sv, "abbba"sv, "abbbb"sv, "baaaa"sv, "baaab"sv, "baaba"sv,
         "baabb"sv, "babaa"sv, "babab"sv, "babba"sv, "babbb"sv, "bbaaa"sv, "bbaab"sv, "bbaba"sv, "bbabb"sv,
         "bbbaa"sv, "bbbab"sv, "bbbba"sv, "bbbbb"sv}},
    {"a{2,3}|b+"sv,
     {"b"sv, "aa"sv, "bb"sv, "aaa"sv, "bbb"sv, "bbbb"sv, "bbbbb"sv}},
    {"(a?b?){2}"sv,
     {""sv, "a"sv, "b"sv, "aa"sv, "ab"sv, "ba"sv, "bb"sv, "aab"sv, "aba"sv, "abb"sv, "bab"sv, "abab"sv}},
    {"(?:a|bc)+?"sv,
     {"a"sv, "aa"sv, "bc"sv, "aaa"sv, "abc"sv, "bca"sv, "aaaa"sv, "aabc"sv, "abca"sv, "bcaa"sv, "bcbc"sv,
         "aaaaa"sv, "aaabc"sv, "aabca"sv, "abcaa"sv, "abcbc"sv, "bcaaa"sv, "bcabc"sv, "bcbca"sv}},
    {"((a|)*b)*"sv,
     {""sv, "b"sv, "ab"sv, "bb"sv, "aab"sv, "abb"sv, "bab"sv, "bbb"sv, "aaab"sv, "aabb"sv, "abab"sv,
         "abbb"sv, "baab"sv, "babb"sv, "bbab"sv, "bbbb"sv, "aaaab"sv, "aaabb"sv, "aabab"sv, "aabbb"sv,
         "abaab"sv, "ababb"sv, "abbab"sv, "abbbb"sv, "baaab"sv, "baabb"sv, "babab"sv, "babbb"sv, "bbaab"sv,
         "bbabb"sv, "bbbab"sv, "bbbbb"sv}},
    {"[^b]{1,2}c?"sv,
     {"a"sv, "c"sv, "aa"sv, "ac"sv, "ca"sv, "cc"sv, "aac"sv, "acc"sv, "cac"sv, "ccc"sv}},
    {"(a*|b)+"sv,
     {""sv, "a"sv, "b"sv, "aa"sv, "ab"sv, "ba"sv, "bb"sv, "aaa"sv, "aab"sv, "aba"sv, "abb"sv, "baa"sv,
         "bab"sv, "bba"sv, "bbb"sv, "aaaa"sv, "aaab"sv, "aaba"sv, "aabb"sv, "abaa"sv, "abab"sv, "abba"sv,
         "abbb"sv, "baaa"sv, "baab"sv, "baba"sv, "babb"sv, "bbaa"sv, "bbab"sv, "bbba"sv, "bbbb"sv, "aaaaa"sv,
         "aaaab"sv, "aaaba"sv, "aaabb"sv, "aabaa"sv, "aabab"sv, "aabba"sv, "aabbb"sv, "abaaa"sv, "abaab"sv,
         "ababa"sv, "ababb"sv, "abbaa"sv, "abbab"sv, "abbba"sv, "abbbb"sv, "baaaa"sv, "baaab"sv, "baaba"sv,
         "baabb"sv, "babaa"sv, "babab"sv, "babba"sv, "babbb"sv, "bbaaa"sv, "bbaab"sv, "bbaba"sv, "bbabb"sv,
         "bbbaa"sv, "bbbab"sv, "bbbba"sv, "bbbbb"sv}},
    {"(a{0}|b{0,1})*c"sv,
     {"c"sv, "bc"sv, "bbc"sv, "bbbc"sv, "bbbbc"sv}},
    {"a(b|c){,2}a?"sv,
     {"a"sv, "aa"sv, "ab"sv, "ac"sv, "aba"sv, "abb"sv, "abc"sv, "aca"sv, "acb"sv, "acc"sv, "abba"sv,
         "abca"sv, "acba"sv, "acca"sv}},
    {"(?:(?:a|b)(?:c|))*c"sv,
     {"c"sv, "ac"sv, "bc"sv, "aac"sv, "abc"sv, "acc"sv, "bac"sv, "bbc"sv, "bcc"sv, "aaac"sv, "aabc"sv,
         "aacc"sv, "abac"sv, "abbc"sv, "abcc"sv, "acac"sv, "acbc"sv, "baac"sv, "babc"sv, "bacc"sv, "bbac"sv,
         "bbbc"sv, "bbcc"sv, "bcac"sv, "bcbc"sv, "aaaac"sv, "aaabc"sv, "aaacc"sv, "aabac"sv, "aabbc"sv,
         "aabcc"sv, "aacac"sv, "aacbc"sv, "abaac"sv, "ababc"sv, "abacc"sv, "abbac"sv, "abbbc"sv, "abbcc"sv,
         "abcac"sv, "abcbc"sv, "acaac"sv, "acabc"sv, "acacc"sv, "acbac"sv, "acbbc"sv, "acbcc"sv, "baaac"sv,
         "baabc"sv, "baacc"sv, "babac"sv, "babbc"sv, "babcc"sv, "bacac"sv, "bacbc"sv, "bbaac"sv, "bbabc"sv,
         "bbacc"sv, "bbbac"sv, "bbbbc"sv, "bbbcc"sv, "bbcac"sv, "bbcbc"sv, "bcaac"sv, "bcabc"sv, "bcacc"sv,
         "bcbac"sv, "bcbbc"sv, "bcbcc"sv}},
    {"[a-b]*?c{2}"sv,
     {"cc"sv, "acc"sv, "bcc"sv, "aacc"sv, "abcc"sv, "bacc"sv, "bbcc"sv, "aaacc"sv, "aabcc"sv, "abacc"sv,
         "abbcc"sv, "baacc"sv, "babcc"sv, "bbacc"sv, "bbbcc"sv}},
    {"(a|ab)(c|bcd)?"sv,
     {"a"sv, "ab"sv, "ac"sv, "abc"sv}},
};

TEST(Regex, MatchesPythonOnEveryShortString) {
  std::vector<std::string> all{""};
  for (size_t begin = 0, len = 1; len <= 5; ++len) {
    const size_t end = all.size();
    for (size_t i = begin; i < end; ++i) {
      for (const char c : {'a', 'b', 'c'}) all.push_back(all[i] + c);
    }
    begin = end;
  }
  ASSERT_EQ(all.size(), 364u);
  for (const auto& [pattern, accepted] : k_exhaustive) {
    const auto g = compile(pattern);
    for (const auto& s : all) {
      const bool want = std::find(accepted.begin(), accepted.end(), s) != accepted.end();
      EXPECT_EQ(accepts(g, s), want) << "pattern " << pattern << " on '" << s << "'";
    }
  }
}

// Generated likewise: Python's verdict on chosen strings.
struct probe_case {
  std::string_view pattern;
  std::vector<std::pair<std::string_view, bool>> probes;
};
const std::vector<probe_case> k_probes = {
    {"\\d{3}-\\d{4}"sv,
     {{"555-1234"sv, true}, {"5551234"sv, false}, {"55-1234"sv, false}, {"555-12345"sv, false},
         {"٣٣٣-1234"sv, false}}},
    {"[\\w.+-]+@[\\w-]+\\.[a-z]{2,}"sv,
     {{"a.b+c@ex-ample.com"sv, true}, {"a@b.c"sv, false}, {"@b.com"sv, false}, {"a@b.co"sv, true},
         {"é@b.com"sv, false}}},
    {"\\s*\\S+\\s*"sv,
     {{" x "sv, true}, {"\t\nab\r"sv, true}, {"  "sv, false}, {"a b"sv, false}, {"\x0bq\x0c"sv, true}}},
    {"[^\\d\\s]+"sv,
     {{"abc"sv, true}, {"ab1"sv, false}, {"é€"sv, true}, {"a b"sv, false}, {"_"sv, true}}},
    {"\\W+"sv,
     {{"!@#"sv, true}, {"é"sv, true}, {"a"sv, false}, {" "sv, true}, {"_"sv, false}}},
    {".{2}"sv,
     {{"ab"sv, true}, {"é😀"sv, true}, {"a\n"sv, false}, {"\r\t"sv, true}, {"abc"sv, false}}},
    {"[à-ÿ]+|[α-ω]{1,3}"sv,
     {{"àéÿ"sv, true}, {"αβγ"sv, true}, {"αβγδ"sv, false}, {"Ā"sv, false}, {"aé"sv, false}}},
    {"[\\u4e00-\\u9fff]+[\\U0001F600-\\U0001F64F]?"sv,
     {{"中文"sv, true}, {"中文😀"sv, true}, {"😀"sv, false}, {"中😀😀"sv, false}, {"中a"sv, false}}},
    {"(?P<year>\\d{4})-(?P<month>0[1-9]|1[0-2])"sv,
     {{"2024-01"sv, true}, {"2024-12"sv, true}, {"2024-13"sv, false}, {"2024-00"sv, false}, {"224-01"sv,
         false}}},
    {"\\x41\\u00e9\\U0001F600\\101\\0\\n"sv,
     {{"Aé😀A\x00\n"sv, true}, {"Aé😀A0\n"sv, false}, {"Aé😀A\x00"sv, false}}},
    {"\\.\\*\\\\\\(\\[\\{\\-\\/\\]\\}\\|\\$\\^\\?\\+\\ "sv,
     {{".*\\([{-/]}|$^?+ "sv, true}, {"x"sv, false}}},
    {"a{,2}b{2,}c{1}d{,}"sv,
     {{"bb"sv, false}, {"aabbbcd"sv, true}, {"aaabbc"sv, false}, {"abcddd"sv, false}, {"abbc"sv, true}}},
    {"a{x}|b{}|c{1,a}|d{|e{,"sv,
     {{"a{x}"sv, true}, {"b{}"sv, true}, {"c{1,a}"sv, true}, {"d{"sv, true}, {"e{,"sv, true}, {"a"sv,
         false}, {"dd"sv, false}}},
    {"[]a]+[^]a]"sv,
     {{"]a]b"sv, true}, {"a]"sv, false}, {"]]]]\n"sv, true}, {"aa"sv, false}}},
    {"[-a][a-][a-c-e]"sv,
     {{"-a-"sv, true}, {"aab"sv, true}, {"a-e"sv, true}, {"-ad"sv, false}, {"aad"sv, false}}},
    {"[\\]\\\\\\-^]+"sv,
     {{"]\\-^"sv, true}, {"^"sv, true}, {"a"sv, false}}},
    {"[\\b\\t][\\d\\-z]"sv,
     {{"\x08""5"sv, true}, {"\t-"sv, true}, {"\tz"sv, true}, {"\ty"sv, false}, {" 5"sv, false}}},
    {"^(ab|cd)+$"sv,
     {{"abcd"sv, true}, {"ab"sv, true}, {""sv, false}, {"abc"sv, false}}},
    {"(a|b|)+?c*?"sv,
     {{""sv, true}, {"c"sv, true}, {"abba"sv, true}, {"abcc"sv, true}, {"ca"sv, false}}},
    {"(?:(?:(?:x)))+|y??"sv,
     {{"x"sv, true}, {"xxx"sv, true}, {""sv, true}, {"y"sv, true}, {"yy"sv, false}}},
    {"[^\\x00-\\x7f]+"sv,
     {{"é"sv, true}, {"aé"sv, false}, {"中😀"sv, true}, {""sv, false}}},
    {"[\\s\\S]*"sv,
     {{""sv, true}, {"a\nb"sv, true}, {"\x00\x7f"sv, true}}},
};

TEST(Regex, MatchesPythonOnProbes) {
  for (const auto& [pattern, probes] : k_probes) {
    const auto g = compile(pattern);
    for (const auto& [s, want] : probes) EXPECT_EQ(accepts(g, s), want) << "pattern " << pattern << " on '" << s << "'";
  }
}

}  // namespace
}  // namespace spate::grammar
