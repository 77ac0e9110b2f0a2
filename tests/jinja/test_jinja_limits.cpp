// Hostile templates and inputs: every one must end in chat_template_error (or a correct render),
// quickly, never in a crash, a hang or unbounded memory.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include <boost/json.hpp>

#include "jinja/chat_template.h"
#include "jinja/jinja_context.h"
#include "jinja/jinja_error.h"
#include "jinja/jinja_render.h"

namespace spate {
namespace {

namespace json = boost::json;

// Renders `tpl` with the default limits; returns the error message ("" if it rendered).
std::string error_of(const std::string& tpl, const json::array& messages = {}) {
  try {
    const chat_template t(tpl, "", "");
    t.render(messages, {});
  } catch (const chat_template_error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// Renders with custom limits through the internal API; returns the limit_error message.
std::string limit_error_of(const std::string& tpl, const jinja::render_limits& lim) {
  const jinja::compiled_template t(tpl);
  jinja::render_context ctx(lim, 0);
  try {
    t.render(ctx, {});
  } catch (const jinja::limit_error& e) {
    return e.what();
  }
  return "";
}

TEST(JinjaLimits, DeepMacroRecursionStops) {
  EXPECT_TRUE(contains(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), "recursion too deep"));
}

TEST(JinjaLimits, MutualRecursionStops) {
  EXPECT_TRUE(
      contains(error_of("{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}"),
               "recursion too deep"));
}

TEST(JinjaLimits, StackBudgetStopsDeepEvaluation) {
  jinja::render_limits lim;
  lim.max_stack_bytes = 16 * 1024;
  EXPECT_TRUE(contains(limit_error_of("{% macro f(n) %}{{ (((((f(n + 1))))))|trim }}{% endmacro %}{{ f(0) }}", lim),
                       "recursion too deep"));
}

TEST(JinjaLimits, NestedHugeLoopsStop) {
  jinja::render_limits lim;
  lim.max_steps = 100000;
  EXPECT_TRUE(
      contains(limit_error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", lim),
               "steps"));
}

TEST(JinjaLimits, ExponentialMacroFanOutStops) {
  jinja::render_limits lim;
  lim.max_steps = 100000;
  EXPECT_TRUE(contains(
      limit_error_of("{% macro f(n) %}{% if n > 0 %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(60) }}", lim),
      "steps"));
}

TEST(JinjaLimits, DefaultStepLimitEndsNestedLoops) {
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(
      contains(error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"), "steps"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
}

TEST(JinjaLimits, HugeOutputStops) {
  EXPECT_TRUE(contains(error_of("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}"), "output exceeded"));
}

TEST(JinjaLimits, HugeStringsStop) {
  EXPECT_TRUE(contains(error_of("{{ 'a' * 10**10 }}"), "longer than the limit"));
  EXPECT_TRUE(contains(error_of("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}"
                                "{% endfor %}"),
                       "longer than the limit"));
  EXPECT_TRUE(contains(error_of("{{ 'x'|center(999999999) }}"), "longer than the limit"));
  EXPECT_TRUE(contains(error_of("{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
                                "{% set ns.s = ns.s|replace('a', 'aa') %}{% endfor %}"),
                       "longer than the limit"));
}

TEST(JinjaLimits, QuadraticListBuildingStops) {
  jinja::render_limits lim;
  lim.max_built_bytes = 1 << 20;
  EXPECT_TRUE(contains(limit_error_of("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}"
                                      "{% set ns.l = ns.l + [i] %}{% endfor %}",
                                      lim),
                       "bytes of strings and lists"));
}

TEST(JinjaLimits, DeepNestingIsRejected) {
  EXPECT_TRUE(contains(error_of("{{ " + std::string(10000, '(') + "1" + std::string(10000, ')') + " }}"), "line 1"));
  std::string blocks;
  for (int i = 0; i < 10000; ++i) blocks += "{% if true %}";
  EXPECT_TRUE(contains(error_of(blocks), "nested too deeply"));
  std::string chain = "{{ 1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  EXPECT_TRUE(contains(error_of(chain + " }}"), "too deeply nested"));
  std::string filters = "{{ 'x'";
  for (int i = 0; i < 5000; ++i) filters += "|trim";
  EXPECT_TRUE(contains(error_of(filters + " }}"), "too deeply nested"));
}

TEST(JinjaLimits, DeepValuesAreRejected) {
  EXPECT_TRUE(contains(error_of("{% set ns = namespace(x=1) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}"
                                "{% endfor %}{{ ns.x }}"),
                       "nesting too deep"));
  EXPECT_TRUE(contains(error_of("{% set ns = namespace(x=1) %}{% for i in range(3000) %}"
                                "{% set ns.x = namespace(y=[ns.x]) %}{% endfor %}{{ ns.x }}"),
                       "too deep"));
  EXPECT_TRUE(contains(error_of("{% set ns = namespace(g=[1]) %}{% for i in range(10000) %}"
                                "{% set ns.g = ns.g|map('string') %}{% endfor %}{{ ns.g|list }}"),
                       "nested generators"));
  // Deeply nested JSON input.
  json::value v = json::array{};
  for (int i = 0; i < 1000; ++i) v = json::array{v};
  json::array messages{json::object{{"role", "user"}, {"content", v}}};
  EXPECT_TRUE(contains(error_of("{{ messages }}", messages), "too deep"));
}

TEST(JinjaLimits, ReferenceCyclesRenderAndAreFreed) {
  EXPECT_EQ(error_of("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns }}"), "");
  const chat_template t("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns }}", "", "");
  EXPECT_EQ(t.render({}, {}), "<Namespace {'self': <Namespace {...}>}>");
  const chat_template m(
      "{% set ns = namespace() %}{% macro f() %}{{ ns }}{% endmacro %}{% set ns.f = f %}{{ ns.f() }}"
      "{% for x in [1] %}{{ loop.changed(loop) }}{% endfor %}",
      "", "");
  EXPECT_EQ(m.render({}, {}), "<Namespace {'f': <Macro 'f'>}>True");
}

TEST(JinjaLimits, OversizedSourceIsRejected) {
  EXPECT_TRUE(contains(error_of(std::string(2 << 20, 'x')), "larger than"));
}

TEST(JinjaLimits, InvalidUtf8NeverCrashes) {
  const chat_template t("caf\xe9 {{ messages[0].content }} \xff", "", "");
  const json::array m{json::object{{"role", "user"}, {"content", json::string("bad \xc3\x28 bytes")}}};
  EXPECT_EQ(t.render(m, {}), "caf\xEF\xBF\xBD bad \xEF\xBF\xBD( bytes \xEF\xBF\xBD");
}

TEST(JinjaLimits, GarbageTemplatesFailCleanly) {
  const char* const garbage[] = {
      "{{",
      "{%",
      "{#",
      "{{ 'x'",
      "{% for %}",
      "{% if %}{% endif %}",
      "{{ ) }}",
      "{{ ] }}",
      "{{ {1: }}",
      "{{ x.1e }}",
      "{% set %}",
      "{% macro %}",
      "{{ x|}}",
      "{% raw %}",
      "}}{%}",
      "{{ '\\x' }}",
      "{{ 1 if }}",
      "{% endif %}",
      "{{ a b }}",
      "{% for x in y %}",
      "{{ *x }}",
  };
  for (const char* g : garbage) EXPECT_FALSE(error_of(g).empty()) << g;
}

TEST(JinjaLimits, RangeIsCappedLikeTheSandbox) {
  EXPECT_TRUE(contains(error_of("{{ range(200000)|length }}"), "Range too big"));
  EXPECT_EQ(error_of("{{ range(100000)|length }}"), "");
}

TEST(JinjaLimits, IntegerOverflowIsAnError) {
  EXPECT_TRUE(contains(error_of("{{ 2 ** 1000 }}"), "integer overflow"));
  EXPECT_TRUE(contains(error_of("{{ 9223372036854775807 + 1 }}"), "integer overflow"));
  EXPECT_TRUE(contains(error_of("{{ 99999999999999999999 }}"), "too large"));
}

}  // namespace
}  // namespace spate
