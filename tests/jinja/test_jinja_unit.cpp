// Focused tests of the Jinja renderer's parts: Python value printing, Unicode string methods,
// the lexer's whitespace control, parser errors, scoping, macros, filters and tests. Every
// expected string was checked against Python's Jinja2 3.1 (transformers' environment).
#include <gtest/gtest.h>

#include <string>

#include <boost/json.hpp>

#include "jinja/chat_template.h"
#include "jinja/jinja_context.h"
#include "jinja/jinja_error.h"
#include "jinja/jinja_lexer.h"
#include "jinja/jinja_parser.h"
#include "jinja/jinja_pystr.h"
#include "jinja/jinja_unicode.h"
#include "jinja/jinja_value.h"

namespace spate {
namespace {

namespace json = boost::json;
using jinja::value;

// Renders `tpl` with `vars` (a JSON object) as variables and no messages.
std::string R(const std::string& tpl, const char* vars = "{}") {
  const chat_template t(tpl, "<s>", "</s>");
  chat_template_options o;
  o.extra_context = json::parse(vars).as_object();
  return t.render(json::array(), o);
}

std::string E(const std::string& tpl, const char* vars = "{}") {
  try {
    R(tpl, vars);
  } catch (const chat_template_error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(JinjaValue, FloatReprMatchesPython) {
  EXPECT_EQ(jinja::py_float_repr(1.0), "1.0");
  EXPECT_EQ(jinja::py_float_repr(-0.0), "-0.0");
  EXPECT_EQ(jinja::py_float_repr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(jinja::py_float_repr(1e16), "1e+16");
  EXPECT_EQ(jinja::py_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(jinja::py_float_repr(0.0001), "0.0001");
  EXPECT_EQ(jinja::py_float_repr(0.00001), "1e-05");
  EXPECT_EQ(jinja::py_float_repr(1.5e-7), "1.5e-07");
  EXPECT_EQ(jinja::py_float_repr(123456789012345678.0), "1.2345678901234568e+17");
  EXPECT_EQ(jinja::py_float_repr(5e-324), "5e-324");
  EXPECT_EQ(jinja::py_float_repr(1.0 / 0.0), "inf");
}

TEST(JinjaValue, StrReprMatchesPython) {
  EXPECT_EQ(jinja::py_str_repr("abc"), "'abc'");
  EXPECT_EQ(jinja::py_str_repr("it's"), "\"it's\"");
  EXPECT_EQ(jinja::py_str_repr("both'\""), "'both\\'\"'");
  EXPECT_EQ(jinja::py_str_repr("a\\b\n\t\r\x01\x7f"), "'a\\\\b\\n\\t\\r\\x01\\x7f'");
  EXPECT_EQ(jinja::py_str_repr("\xc2\xa0\xc2\xad\xe2\x80\xa8\xc3\xa9\xf0\x9f\x98\x80"),
            "'\\xa0\\xad\\u2028\xc3\xa9\xf0\x9f\x98\x80'");
}

TEST(JinjaValue, ContainerReprMatchesPython) {
  EXPECT_EQ(R("{{ [1, 'a', none, true, 1.5, [2], {'k': 'v'}] }}"), "[1, 'a', None, True, 1.5, [2], {'k': 'v'}]");
  EXPECT_EQ(R("{{ (1,) }}{{ (1, 2) }}{{ () }}"), "(1,)(1, 2)()");
  EXPECT_EQ(R("{{ x }}", R"({"x": {"a": [1, {"b": null}], "c": "é"}})"), "{'a': [1, {'b': None}], 'c': 'é'}");
  EXPECT_EQ(R("{{ ['a', 'x'|safe] }}"), "['a', Markup('x')]");
  EXPECT_EQ(R("{{ none }}|{{ true }}|{{ undefined_name }}|{{ 1.0 }}"), "None|True||1.0");
  EXPECT_EQ(R("{{ {'a': 1}.items() }}"), "dict_items([('a', 1)])");
  EXPECT_EQ(R("{{ range(3) }}{{ range(1, 9, 2) }}"), "range(0, 3)range(1, 9, 2)");
  EXPECT_EQ(R("{{ namespace(a=1) }}"), "<Namespace {'a': 1}>");
}

TEST(JinjaUnicode, CaseMappingsMatchPython) {
  EXPECT_EQ(jinja::unicode::upper("stra\xc3\x9f"
                                  "e"),
            "STRASSE");
  EXPECT_EQ(jinja::unicode::lower("\xce\xa3\xce\x91\xce\xa3 \xce\x9f\xce\x94\xce\x9f\xce\xa3."),
            "\xcf\x83\xce\xb1\xcf\x82 \xce\xbf\xce\xb4\xce\xbf\xcf\x82.");  // final sigma
  EXPECT_EQ(jinja::unicode::title("\xc7\x86"
                                  "emal hello-world"),
            "\xc7\x85"
            "emal Hello-World");
  EXPECT_EQ(jinja::unicode::capitalize("hELLO"), "Hello");
  EXPECT_EQ(jinja::unicode::lower("\xc4\xb0"), "i\xcc\x87");
  EXPECT_TRUE(jinja::unicode::is_space(0x3000));
  EXPECT_FALSE(jinja::unicode::is_space(0x200B));
}

TEST(JinjaUnicode, SanitizesInvalidUtf8LikePython) {
  EXPECT_EQ(jinja::unicode::sanitize_utf8("a\xff"
                                          "b"),
            "a\xef\xbf\xbd"
            "b");
  EXPECT_EQ(jinja::unicode::sanitize_utf8("\xe2\x82"), "\xef\xbf\xbd");
  EXPECT_EQ(jinja::unicode::sanitize_utf8("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
}

TEST(JinjaPyStr, SplitStripReplace) {
  using jinja::pystr::split;
  EXPECT_EQ(split("  a b  c ", nullptr, -1), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(split("  a b  c ", nullptr, 1), (std::vector<std::string>{"a", "b  c "}));
  const std::string comma = ",";
  EXPECT_EQ(split("a,,b", &comma, -1), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(jinja::pystr::rsplit("a b c", nullptr, 1), (std::vector<std::string>{"a b", "c"}));
  EXPECT_EQ(jinja::pystr::strip("\xe3\x80\x80 x\xc2\xa0", nullptr, true, true), "x");
  EXPECT_EQ(jinja::pystr::replace("ab", "", "-", -1), "-a-b-");
  EXPECT_EQ(jinja::pystr::splitlines("a\nb\r\nc\x0b"
                                     "d",
                                     false),
            (std::vector<std::string>{"a", "b", "c", "d"}));
}

std::vector<jinja::tok> types(const std::string& src) {
  std::vector<jinja::tok> out;
  for (const auto& t : jinja::tokenize(src)) out.push_back(t.type);
  return out;
}

TEST(JinjaLexer, TokensAndLines) {
  using jinja::tok;
  const auto toks = jinja::tokenize("a\n{{ x|f(1, 2.5) }}\n{% if y %}\nz{% endif %}");
  ASSERT_GE(toks.size(), 10u);
  EXPECT_EQ(toks[0].type, tok::data);
  EXPECT_EQ(toks[0].text, "a\n");
  EXPECT_EQ(toks[1].type, tok::variable_begin);
  EXPECT_EQ(toks[1].line, 2);
  EXPECT_EQ(toks[2].text, "x");
  EXPECT_EQ(toks[6].type, tok::integer);
  EXPECT_EQ(toks[6].ival, 1);
  EXPECT_EQ(toks[8].type, tok::floating);
  EXPECT_EQ(toks[8].fval, 2.5);
  EXPECT_EQ(toks[12].type, tok::block_begin);
  EXPECT_EQ(toks[12].line, 3);
  EXPECT_EQ(toks.back().type, tok::eof);
  EXPECT_EQ(types("{# c #}"), (std::vector<tok>{tok::eof}));
  EXPECT_THROW(jinja::tokenize("{{ 'abc }}"), jinja::syntax_error);
  EXPECT_THROW(jinja::tokenize("{# abc"), jinja::syntax_error);
  EXPECT_THROW(jinja::tokenize("{{ ( ] }}"), jinja::syntax_error);
}

TEST(JinjaLexer, WhitespaceControlMatchesJinja2) {
  EXPECT_EQ(R("a\n  {% if true %}\n  x\n  {% endif %}\nb"), "a\n  x\nb");
  EXPECT_EQ(R("{% raw %}\n  {{ x }}\n  {% endraw %}\nY"), "\n  {{ x }}\nY");
  EXPECT_EQ(R("a  {#- c -#}  b\n  {# c #}\nz"), "ab\nz");
  EXPECT_EQ(R("a {{- 'x' -}} b {%- if true -%} c {%- endif -%} d"), "axbcd");
  EXPECT_EQ(R("  {%+ if true %}x{% endif +%}\n"), "  x");
  EXPECT_EQ(R("x\r\ny\rz\n"), "x\ny\nz");
  EXPECT_EQ(R("{{ 'a' }}\nb"), "a\nb");
  EXPECT_EQ(R("a\xe3\x80\x80{%- if true %}x{% endif %}"), "ax");
}

TEST(JinjaLexer, StringLiteralsUsePythonEscapes) {
  EXPECT_EQ(R("{{ 'a\\nb' }}|{{ \"\\x41\\u00e9\\U0001F600\" }}|{{ '\\d' }}|{{ '\\101' }}"),
            "a\nb|A\xc3\xa9\xf0\x9f\x98\x80|\\d|A");
  EXPECT_EQ(R("{{ 'a' 'b' \"c\" }}"), "abc");
  EXPECT_EQ(R("{{ 1_000 }} {{ 0x1F }} {{ 0b11 }} {{ 0o17 }} {{ 1.5e3 }} {{ 1E2 }}"), "1000 31 3 15 1500.0 100.0");
}

TEST(JinjaParser, ErrorsNameTheProblemAndLine) {
  auto err = [](const std::string& src) -> std::pair<std::string, int> {
    try {
      jinja::parse_template(src);
    } catch (const jinja::syntax_error& e) {
      return {e.what(), e.line};
    }
    return {"", 0};
  };
  EXPECT_EQ(err("{% if x %}").first,
            "Unexpected end of template. Jinja was looking for the following tags: 'elif' or 'else' or 'endif'. "
            "The innermost block that needs to be closed is 'if'.");
  EXPECT_EQ(err("\n\n{% for x in y %}{% endif %}"),
            std::make_pair(std::string("Encountered unknown tag 'endif'. Jinja was looking for the following tags: "
                                       "'endfor' or 'else'. The innermost block that needs to be closed is 'for'."),
                           3));
  EXPECT_EQ(err("{{ x | }}").first, "expected token 'name', got 'end of print statement'");
  EXPECT_EQ(err("{{ }}").first, "Expected an expression, got 'end of print statement'");
  EXPECT_EQ(err("{% macro m(a=1, b) %}{% endmacro %}").first, "non-default argument follows default argument");
  EXPECT_EQ(err("{% set true = 1 %}").first, "can't assign to 'const'");
  EXPECT_EQ(err("{{ x|nofilter }}").first, "No filter named 'nofilter'.");
  EXPECT_EQ(err("{% break %}").first, "'break' outside loop");
  EXPECT_EQ(err("{% if false %}{{ x|nofilter }}{% endif %}").first, "");  // unknown filters in if: runtime
}

TEST(JinjaRender, FormatBracketsNestAsInPython) {
  EXPECT_EQ(R("{{ '{0:{1}}|{{x}}'.format(3, 5) }}"), "    3|{x}");
  EXPECT_NE(E("{{ '{0'.format(1) }}").find("expected '}' before end of string"), std::string::npos);
  EXPECT_EQ(R("{{ '%(a)s-%((b))s' % {'a': 1, '(b)': 2} }}"), "1-2");
  EXPECT_NE(E("{{ '%(a' % {'a': 1} }}").find("incomplete format key"), std::string::npos);
}

TEST(JinjaRender, ScopingFollowsJinja2) {
  EXPECT_EQ(R("{% set x = 0 %}{% for i in [1,2] %}[{{ x }}]{% set x = i %}({{ x }}){% endfor %}{{ x }}"),
            "[0](1)[0](2)0");
  EXPECT_EQ(R("{% if true %}{% set x = 5 %}{% endif %}{{ x }}"), "5");
  EXPECT_EQ(R("{% set x %}{% set z = 1 %}{% endset %}{{ z }}"), "");
  EXPECT_EQ(R("{% with a = 1, b = a %}{{ a }}{{ b }}{% endwith %}{{ a }}", R"({"a": 5})"), "155");
  EXPECT_EQ(R("{% set ns = namespace(found=false) %}{% for x in [1,2,3] %}{% if x == 2 %}{% set ns.found = true %}"
              "{% endif %}{% endfor %}{{ ns.found }}"),
            "True");
}

TEST(JinjaRender, MacrosFollowJinja2) {
  EXPECT_EQ(
      R("{% macro m(a, b='x') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ m(a=3, b=4) }}{{ m(b=5) }}"),
      "1x12345");
  EXPECT_EQ(R("{% macro m() %}{{ x }}{% endmacro %}{{ m() }}{% set x = 2 %}{{ m() }}"), "2");
  EXPECT_EQ(R("{% for i in [1,2] %}{% macro m() %}{{ i }}{% endmacro %}{{ m() }}{% endfor %}"), "12");
  EXPECT_EQ(R("{% macro m(a) %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, c=3) }}"), "(2,){'c': 3}");
  EXPECT_EQ(R("{% macro m() %}<{{ caller() }}>{% endmacro %}{% call m() %}X{% endcall %}"), "<X>");
  EXPECT_EQ(E("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}"),
            "template line 1: macro 'm' takes not more than 1 argument(s)");
}

TEST(JinjaRender, LoopsFollowJinja2) {
  EXPECT_EQ(R("{% for x in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.revindex }}-{{ loop.first }}-"
              "{{ loop.last }}-{{ loop.cycle('a','b') }}|{% endfor %}"),
            "-2-3-True-False-a|1-3-2-False-False-b|2--1-False-True-a|");
  EXPECT_EQ(R("{% for x in [1,2,3] if x > 1 %}{{ loop.index }}/{{ loop.length }}{% else %}none{% endfor %}"), "1/22/2");
  EXPECT_EQ(R("{% for x in [1,2,3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% if x == 3 %}{% break %}"
              "{% endif %}{% endfor %}"),
            "13");
  EXPECT_EQ(R("{% for x in [1] %}{% break %}{% else %}E{% endfor %}done"), "Edone");
  EXPECT_EQ(R("{% for k, v in d|dictsort %}{{ k }}={{ v }};{% endfor %}", R"({"d": {"b": 1, "a": 2}})"), "a=2;b=1;");
}

TEST(JinjaRender, OperatorsFollowPython) {
  EXPECT_EQ(
      R("{{ 1/2 }} {{ 4/2 }} {{ 7//2 }} {{ -7//2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2**10 }} {{ 2**-1 }} {{ 2**3**2 }}"),
      "0.5 2.0 3 -4 2 -2 1024 0.5 64");
  EXPECT_EQ(R("{{ 'a' * 3 }}{{ [1] * 2 }}{{ 'a' ~ none ~ 1 ~ [1] ~ undefined_name }}"), "aaa[1, 1]aNone1[1]");
  EXPECT_EQ(R("{{ 0 or 'x' }}|{{ 1 and 'y' }}|{{ '' and 'z' }}|{{ 1 < 2 < 3 }}|{{ 'é' > 'z' }}"), "x|y||True|True");
  EXPECT_EQ(R("{{ x[1:] }}{{ x[::-1] }}{{ 'héllo'[1:3] }}{{ 'abc'[-1] }}", R"({"x": [1, 2, 3]})"),
            "[2, 3][3, 2, 1]élc");
  EXPECT_EQ(R("{{ '%s-%05.1f' % ('a', 3.14159) }}|{{ '{:>4}|{!r}'.format('x', 'y') }}"), "a-003.1|   x|'y'");
  EXPECT_EQ(E("{{ 'a' + 1 }}"), "template line 1: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(E("{{ 1 < 'a' }}"), "template line 1: '<' not supported between instances of 'int' and 'str'");
}

TEST(JinjaRender, FiltersFollowJinja2AndTransformers) {
  EXPECT_EQ(R("{{ x|tojson }}", R"({"x": {"a": [1, 2.5, null, true, "é\"\n"], "b": {}}})"),
            "{\"a\": [1, 2.5, null, true, \"é\\\"\\n\"], \"b\": {}}");
  EXPECT_EQ(R("{{ x|tojson(indent=2) }}", R"({"x": {"a": [1], "b": {}}})"),
            "{\n  \"a\": [\n    1\n  ],\n  \"b\": {}\n}");
  EXPECT_EQ(R("{{ x|tojson(2) }}", R"({"x": "é"})"), "\"\\u00e9\"");  // positional = ensure_ascii
  EXPECT_EQ(R("{{ '  abc  '|trim }}|{{ 'hello-world (foo)'|title }}|{{ 'hELLO'|capitalize }}"),
            "abc|Hello-World (Foo)|Hello");
  EXPECT_EQ(R("{{ [3,1,2]|sort }}{{ ['b','A','a']|sort }}{{ [1,2,1]|unique|list }}{{ [1,2,3]|reverse|list }}"),
            "[1, 2, 3]['A', 'a', 'b'][1, 2][3, 2, 1]");
  EXPECT_EQ(
      R("{{ [{'a':1},{'b':2}]|map(attribute='a')|list }}{{ [{'a':1},{'a':2}]|selectattr('a','equalto',2)|list }}"),
      "[1, Undefined][{'a': 2}]");
  EXPECT_EQ(R("{{ 'a\nb\n\nc'|indent(2, true) }}"), "  a\n  b\n\n  c");
  EXPECT_EQ(R("{{ undefined_name|default('d') }}{{ ''|default('d', true) }}{{ '42.7'|int }}{{ 'x'|float }}"),
            "dd420.0");
  EXPECT_EQ(R("{{ 'Use '|safe + d.name + ': '|safe + d|tojson }}", R"({"d": {"name": "a<b>"}})"),
            "Use a&lt;b&gt;: {&#34;name&#34;: &#34;a&lt;b&gt;&#34;}");  // Markup escapes what is added to it
  EXPECT_EQ(E("{{ x|items|tojson }}", R"({"x": {"a": 1}})"),
            "template line 1: Object of type generator is not JSON serializable");
}

TEST(JinjaRender, TestsAndAttributesFollowJinja2) {
  EXPECT_EQ(R("{{ 1 is number }}{{ true is integer }}{{ {} is sequence }}{{ none is iterable }}{{ u is callable }}"),
            "TrueFalseTrueFalseTrue");
  EXPECT_EQ(R("{{ d['items'] }}|{{ d.nokey is defined }}|{{ d.get('items') }}", R"({"d": {"items": 5}})"), "5|False|5");
  EXPECT_EQ(R("{{ x.y is defined }}{% set ns = namespace(a=1) %}{{ ns.b is defined }}{{ ns['a'] }}", R"({"x": {}})"),
            "FalseFalse1");
  EXPECT_EQ(E("{{ [].append(1) }}"), "template line 1: access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(E("{{ x.y.z }}", R"({"x": {}})"), "template line 1: 'dict object' has no attribute 'y'");
}

}  // namespace
}  // namespace spate
