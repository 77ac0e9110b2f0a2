// Tool-call formats (protocol/tool_calls.h): names, detection on real chat
// templates, syntax, ids, the generic system prompt, and the parsers: each
// format's shapes, fallbacks to content, and the streaming parser agreeing
// with the whole-output parse at every split point.
#include "protocol/tool_calls.h"
#include "protocol/tool_calls_detail.h"

#include "jinja/chat_template.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace spate::api {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

using F = tool_call_format;
using ev = tool_stream_event::kind;

constexpr uint64_t k_seed = 42;

parsed_tool_output parse(F f, std::string_view text) {
  tool_call_ids ids(k_seed);
  return parse_tool_calls(f, text, ids);
}

// What a stream produced, rebuilt: content, complete calls, and how many calls
// ended incomplete. Also checks the events' shape.
struct streamed {
  parsed_tool_output out;
  int incomplete = 0;
};

void collect(const tool_stream_events& events, streamed& s, tool_call& cur, int& open_index) {
  for (const auto& e : events) {
    switch (e.type) {
      case ev::content:
        EXPECT_FALSE(e.text.empty());
        s.out.content += e.text;
        break;
      case ev::call_begin:
        EXPECT_EQ(open_index, -1) << "call_begin inside a call";
        open_index = e.index;
        cur = tool_call{e.id, e.name, {}};
        break;
      case ev::arguments:
        EXPECT_EQ(e.index, open_index);
        EXPECT_FALSE(e.text.empty());
        cur.arguments += e.text;
        break;
      case ev::call_end:
        EXPECT_EQ(e.index, open_index);
        open_index = -1;
        if (e.complete) s.out.calls.push_back(cur);
        else ++s.incomplete;
        break;
      default: ADD_FAILURE() << "a tool-call stream emits no reasoning"; break;
    }
  }
}

streamed stream_pieces(F f, const std::vector<std::string_view>& pieces) {
  tool_call_stream st(f, k_seed);
  streamed s;
  tool_call cur;
  int open_index = -1;
  for (auto p : pieces) collect(st.feed(p), s, cur, open_index);
  collect(st.finish(), s, cur, open_index);
  EXPECT_EQ(open_index, -1) << "a call never ended";
  EXPECT_TRUE(st.finish().empty());
  return s;
}

void expect_same(const parsed_tool_output& a, const parsed_tool_output& b, const std::string& where) {
  EXPECT_EQ(a.content, b.content) << where;
  ASSERT_EQ(a.calls.size(), b.calls.size()) << where;
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].id, b.calls[i].id) << where;
    EXPECT_EQ(a.calls[i].name, b.calls[i].name) << where;
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments) << where;
  }
}

// The stream at every split point (two pieces), byte by byte, and in random
// pieces agrees with the whole parse.
void expect_stream_agrees(F f, std::string_view text) {
  const auto whole = parse(f, text);
  for (size_t i = 0; i <= text.size(); ++i) {
    const auto s = stream_pieces(f, {text.substr(0, i), text.substr(i)});
    expect_same(whole, s.out, "split at " + std::to_string(i) + " of: " + std::string(text));
    if (::testing::Test::HasFailure()) return;
  }
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < text.size(); ++i) bytes.push_back(text.substr(i, 1));
  expect_same(whole, stream_pieces(f, bytes).out, "byte by byte: " + std::string(text));
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string_view> pieces;
    size_t at = 0;
    while (at < text.size()) {
      const size_t n = std::min<size_t>(text.size() - at, 1 + rng() % 7);
      pieces.push_back(text.substr(at, n));
      at += n;
    }
    expect_same(whole, stream_pieces(f, pieces).out, "random pieces: " + std::string(text));
  }
}

bool is_json_object(std::string_view s) {
  boost::system::error_code ec;
  auto v = json::parse(s, ec);
  return !ec && v.is_object();
}

// ---------------------------------------------------------------- JSON checkers

// json_value_scanner accepts exactly what Boost.JSON parses (ASCII inputs, no
// surrogate escapes: the scanner leaves those to the string decoder).
TEST(ToolCallJson, ScannerAgreesWithBoost) {
  const std::vector<std::string> frags = {"{", "}", "[", "]", "\"", ":", ",", " ", "\n", "\"k\"", "1", "0", "-",
                                          ".", "e", "+", "2", "true", "fals", "e", "null", "\\", "n", "u", "00e9",
                                          "\\\"", "x", "\t"};
  std::mt19937 rng(5);
  int valid = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string t;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) t += frags[rng() % frags.size()];
    if (detail::is_json_ws(t.front()) || detail::is_json_ws(t.back())) continue;
    detail::json_value_scanner sc;
    bool accepted = false, broke = false;
    const std::string fed = t + " ";
    for (size_t i = 0; i < fed.size() && !accepted && !broke; ++i) {
      const auto st = sc.feed(fed[i]);
      if (st == detail::json_value_scanner::status::error) broke = true;
      else if (st == detail::json_value_scanner::status::done) accepted = i + 1 == t.size();
      else if (st == detail::json_value_scanner::status::done_unconsumed) accepted = i == t.size();
      if (st == detail::json_value_scanner::status::done && i + 1 != t.size()) broke = true;
      if (st == detail::json_value_scanner::status::done_unconsumed && i != t.size()) broke = true;
    }
    boost::system::error_code ec;
    json::parse(t, ec);
    EXPECT_EQ(accepted, !ec) << t;
    valid += accepted;
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(valid, 100);
}

TEST(ToolCallJson, StringDecoder) {
  auto decode = [](std::string_view body, std::string& out) {
    detail::json_string_decoder d;
    for (char c : body) {
      const auto s = d.feed(c, out);
      if (s != detail::json_string_decoder::status::more) return s;
    }
    return detail::json_string_decoder::status::more;
  };
  using S = detail::json_string_decoder::status;
  std::string out;
  EXPECT_EQ(decode(R"(a\n\"\\\/\u00e9\ud83d\ude00")", out), S::done);
  EXPECT_EQ(out, "a\n\"\\/é😀");
  for (std::string_view bad : {"\\x", "\\u12g4", "\\ud83d\"", "\\ude00", "\\ud83d\\u0041", "\x01"}) {
    out.clear();
    EXPECT_EQ(decode(bad, out), S::error) << bad;
  }
}

TEST(ToolCallJson, IncompleteUtf8Tail) {
  EXPECT_EQ(detail::incomplete_utf8_tail(""), 0u);
  EXPECT_EQ(detail::incomplete_utf8_tail("abc"), 0u);
  EXPECT_EQ(detail::incomplete_utf8_tail("a\xC3"), 1u);
  EXPECT_EQ(detail::incomplete_utf8_tail("a\xC3\xA9"), 0u);
  EXPECT_EQ(detail::incomplete_utf8_tail("\xF0\x9F\x8E"), 3u);
  EXPECT_EQ(detail::incomplete_utf8_tail("\xF0\x9F\x8E\x89"), 0u);
  EXPECT_EQ(detail::incomplete_utf8_tail("\x80\x80"), 0u);
  EXPECT_EQ(detail::incomplete_utf8_tail("\xFF"), 0u);
}

// ---------------------------------------------------------------- names

TEST(ToolCallFormat, Names) {
  EXPECT_EQ(tool_call_format_from_name("hermes"), F::hermes);
  EXPECT_EQ(tool_call_format_from_name("qwen"), F::hermes);
  EXPECT_EQ(tool_call_format_from_name("qwen2_5"), F::hermes);
  EXPECT_EQ(tool_call_format_from_name("llama3_json"), F::llama3_json);
  EXPECT_EQ(tool_call_format_from_name("llama3"), F::llama3_json);
  EXPECT_EQ(tool_call_format_from_name("llama4_json"), F::llama3_json);
  EXPECT_EQ(tool_call_format_from_name("mistral"), F::mistral);
  EXPECT_EQ(tool_call_format_from_name("generic"), F::generic);
  EXPECT_EQ(tool_call_format_from_name("Hermes"), std::nullopt);
  EXPECT_EQ(tool_call_format_from_name(""), std::nullopt);
  EXPECT_EQ(tool_call_format_from_name("pythonic"), std::nullopt);
  for (F f : {F::generic, F::hermes, F::llama3_json, F::mistral})
    EXPECT_EQ(tool_call_format_from_name(tool_call_format_name(f)), f);
}

// ---------------------------------------------------------------- detection

bool testdata_required() {
  const char* v = std::getenv("SPATE_REQUIRE_TESTDATA");
  return v && *v && std::string(v) != "0";
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(ToolCallFormat, DetectOnRealTemplates) {
  const fs::path dir = fs::path(SPATE_TESTDATA_DIR) / "chat-templates";
  if (!fs::exists(dir)) {
    if (testdata_required()) FAIL() << "missing " << dir << " (SPATE_REQUIRE_TESTDATA is set)";
    GTEST_SKIP() << "missing " << dir;
  }
  const std::vector<std::pair<std::string, F>> expected = {
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", F::hermes},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", F::hermes},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", F::hermes},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", F::llama3_json},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", F::llama3_json},
      {"meta-llama-Llama-3.3-70B-Instruct.jinja", F::llama3_json},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", F::mistral},
      {"fireworks-ai-llama-3-firefunction-v2.jinja", F::generic},
      {"meetkai-functionary-medium-v3.1.jinja", F::generic},
      {"meetkai-functionary-medium-v3.2.jinja", F::generic},
      {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", F::generic},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", F::generic},
      {"google-gemma-2-2b-it.jinja", F::generic},
      {"openai-gpt-oss-120b.jinja", F::openai},
      {"microsoft-Phi-3.5-mini-instruct.jinja", F::generic},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", F::generic},
  };
  for (const auto& [file, f] : expected) {
    const fs::path p = dir / file;
    if (!fs::exists(p)) {
      if (testdata_required()) ADD_FAILURE() << "missing " << p;
      continue;
    }
    EXPECT_EQ(tool_call_format_name(detect_tool_call_format(read_file(p))), std::string(tool_call_format_name(f)))
        << file;
  }
}

TEST(ToolCallFormat, DetectRule) {
  EXPECT_EQ(detect_tool_call_format(""), F::generic);
  EXPECT_EQ(detect_tool_call_format("{{ '<tool_call>' }}"), F::hermes);
  EXPECT_EQ(detect_tool_call_format("{{ '[TOOL_CALLS]' }}"), F::mistral);
  EXPECT_EQ(detect_tool_call_format("<|start_header_id|> \"parameters\" Environment: ipython"), F::llama3_json);
  EXPECT_EQ(detect_tool_call_format("<|start_header_id|> Environment: ipython"), F::generic);
  EXPECT_EQ(detect_tool_call_format("{{ '<|channel|>' }} <tool_call>"), F::openai);
  EXPECT_EQ(tool_call_format_from_name("openai"), F::openai);
  EXPECT_STREQ(tool_call_format_name(F::openai), "openai");
}

// The real templates write an assistant message's tool_calls in the format
// detected for them; the parser reads them back.
TEST(ToolCallFormat, RoundTripThroughRealTemplates) {
  const fs::path dir = fs::path(SPATE_TESTDATA_DIR) / "chat-templates";
  if (!fs::exists(dir)) {
    if (testdata_required()) FAIL() << "missing " << dir << " (SPATE_REQUIRE_TESTDATA is set)";
    GTEST_SKIP() << "missing " << dir;
  }
  const auto tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
      {"type": "function", "function": {"name": "get_time", "description": "Time",
      "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}])");
  const auto call = [](const char* id, const char* name, const char* args) {
    return json::object{{"id", id}, {"type", "function"},
                        {"function", json::object{{"name", name}, {"arguments", json::parse(args)}}}};
  };
  const std::vector<std::pair<std::string, int>> templates = {
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", 2},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", 2},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", 2},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", 2},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", 1}, {"meta-llama-Llama-3.2-3B-Instruct.jinja", 1},
      {"meta-llama-Llama-3.3-70B-Instruct.jinja", 1},
  };
  for (const auto& [file, n_calls] : templates) {
    SCOPED_TRACE(file);
    const fs::path p = dir / file;
    if (!fs::exists(p)) continue;
    const std::string src = read_file(p);
    const F f = detect_tool_call_format(src);
    chat_template tpl(src, "<s>", "</s>");
    json::array calls{call("abcdefghi", "get_weather", R"({"city": "Paris \"1\" {}"})")};
    if (n_calls == 2) calls.push_back(call("jklmnopqr", "get_time", R"({"tz": "CET", "n": [1, {"x": null}]})"));
    const json::array user{json::object{{"role", "user"}, {"content", "Weather and time in Paris?"}}};
    json::array both = user;
    both.push_back(json::object{{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}});
    chat_template_options opts;
    opts.now_unix_s = 1700000000;
    opts.extra_context["tools"] = tools;
    const std::string prefix = tpl.render(user, opts);
    opts.add_generation_prompt = false;
    const std::string full = tpl.render(both, opts);
    ASSERT_TRUE(full.starts_with(prefix)) << full;
    std::string answer = full.substr(prefix.size());
    for (std::string_view end : {"<|im_end|>\n", "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "</s>"})
      if (answer.ends_with(end)) answer.resize(answer.size() - end.size());
    const auto r = parse(f, answer);
    EXPECT_EQ(r.content.find_first_not_of(" \n"), std::string::npos) << answer;
    ASSERT_EQ(r.calls.size(), calls.size()) << answer;
    for (size_t i = 0; i < calls.size(); ++i) {
      const auto& fn = calls[i].at("function");
      EXPECT_EQ(r.calls[i].name, fn.at("name").as_string());
      EXPECT_EQ(json::parse(r.calls[i].arguments), fn.at("arguments")) << answer;
    }
    expect_stream_agrees(f, answer);
  }
}

// ---------------------------------------------------------------- syntax, ids, prompt

TEST(ToolCallSyntax, PerFormat) {
  const auto h = syntax_of(F::hermes);
  EXPECT_EQ(h.call_prefix, "<tool_call>\n");
  EXPECT_EQ(h.call_suffix, "\n</tool_call>");
  EXPECT_EQ(h.args_key, "arguments");
  const auto m = syntax_of(F::mistral);
  EXPECT_EQ(m.list_open, "[TOOL_CALLS][");
  EXPECT_EQ(m.list_sep, ", ");
  EXPECT_EQ(m.list_close, "]");
  EXPECT_EQ(syntax_of(F::llama3_json).args_key, "parameters");
  EXPECT_EQ(syntax_of(F::generic).list_open, "{\"tool_calls\": [");
  EXPECT_EQ(syntax_of(F::generic).list_close, "]}");
  EXPECT_TRUE(h.text_before_calls);
  EXPECT_TRUE(m.text_before_calls);
  EXPECT_FALSE(syntax_of(F::llama3_json).text_before_calls);
  EXPECT_FALSE(syntax_of(F::generic).text_before_calls);
}

// Text assembled from the syntax parses back into the calls, for every format.
TEST(ToolCallSyntax, AssembledTextParses) {
  for (F f : {F::generic, F::hermes, F::llama3_json, F::mistral}) {
    const auto s = syntax_of(f);
    auto call = [&](const std::string& name, const std::string& args) {
      return s.call_prefix + "{\"" + s.name_key + "\": \"" + name + "\", \"" + s.args_key + "\": " + args + "}" +
             s.call_suffix;
    };
    const std::string text = s.list_open + call("a", R"({"x": 1})") + s.list_sep + call("b", "{}") + s.list_close;
    const auto r = parse(f, text);
    EXPECT_EQ(r.content, "") << tool_call_format_name(f);
    ASSERT_EQ(r.calls.size(), 2u) << tool_call_format_name(f);
    EXPECT_EQ(r.calls[0].name, "a");
    EXPECT_EQ(r.calls[0].arguments, R"({"x": 1})");
    EXPECT_EQ(r.calls[1].name, "b");
    EXPECT_EQ(r.calls[1].arguments, "{}");
    expect_stream_agrees(f, text);
  }
}

TEST(ToolCallIds, DeterministicAndWellFormed) {
  tool_call_ids a(1), b(1), c(2);
  std::vector<std::string> seen;
  for (int i = 0; i < 50; ++i) {
    const auto x = a.next();
    EXPECT_EQ(x, b.next());
    EXPECT_NE(x, c.next());
    ASSERT_EQ(x.size(), 29u);
    EXPECT_EQ(x.substr(0, 5), "call_");
    for (char ch : x.substr(5)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch))) << x;
    for (const auto& y : seen) EXPECT_NE(x, y);
    seen.push_back(x);
  }
}

TEST(GenericPrompt, DescribesToolsAndShapes) {
  const auto tools = json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather now",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
    {"type": "retrieval"}, 42])").as_array();
  const auto p = generic_tool_system_prompt(tools, true);
  EXPECT_NE(p.find(R"({"name":"get_weather","description":"Weather now","parameters":{)"), std::string::npos) << p;
  EXPECT_NE(p.find(R"({"tool_calls": [)"), std::string::npos);
  EXPECT_NE(p.find(R"({"response": )"), std::string::npos);
  EXPECT_NE(p.find("one or more"), std::string::npos);
  EXPECT_EQ(p.find("retrieval"), std::string::npos);
  const auto single = generic_tool_system_prompt(tools, false, true);
  EXPECT_NE(single.find("exactly one"), std::string::npos);
  EXPECT_EQ(single.find(R"({"response": )"), std::string::npos);
  EXPECT_NE(single.find("must call"), std::string::npos);
}

TEST(GenericPrompt, AddSystemPrompt) {
  auto m = json::parse(R"([{"role": "user", "content": "hi"}])").as_array();
  add_system_prompt(m, "TOOLS");
  EXPECT_EQ(json::serialize(m), R"([{"role":"system","content":"TOOLS"},{"role":"user","content":"hi"}])");
  m = json::parse(R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}])").as_array();
  add_system_prompt(m, "TOOLS");
  EXPECT_EQ(m[0].at("content").as_string(), "TOOLS\n\nBe brief.") << "the stable tools before the caller's text";
  EXPECT_EQ(m.size(), 2u);
  m = json::parse(R"([{"role": "system", "content": [{"type": "text", "text": "A"}]}])").as_array();
  add_system_prompt(m, "TOOLS");
  EXPECT_EQ(json::serialize(m[0].at("content")), R"([{"type":"text","text":"TOOLS\n\n"},{"type":"text","text":"A"}])");
  json::array empty;
  add_system_prompt(empty, "TOOLS");
  EXPECT_EQ(empty.size(), 1u);
}

// ---------------------------------------------------------------- hermes

TEST(ToolCallParse, HermesSingle) {
  const std::string t = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  const auto r = parse(F::hermes, t);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city": "Paris"})");
  tool_call_ids ids(k_seed);
  EXPECT_EQ(r.calls[0].id, ids.next());
  expect_stream_agrees(F::hermes, t);
}

TEST(ToolCallParse, HermesTwoCallsWithContent) {
  const std::string t =
      "Let me check both.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"n\": 1}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"s\": \"x}\"}}\n</tool_call>\n";
  const auto r = parse(F::hermes, t);
  EXPECT_EQ(r.content, "Let me check both.\n");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "a");
  EXPECT_EQ(r.calls[1].name, "b");
  EXPECT_EQ(r.calls[1].arguments, R"({"s": "x}"})");
  EXPECT_NE(r.calls[0].id, r.calls[1].id);
  expect_stream_agrees(F::hermes, t);
}

TEST(ToolCallParse, HermesPlainAndMalformed) {
  const std::vector<std::string> plain = {
      "",
      "Hello, world",
      "a < b and <tool_c is not a tag",
      "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1,}}\n</tool_call>",  // bad JSON
      "<tool_call>\n{\"arguments\": {}, \"name\": 1}\n</tool_call>",              // name after arguments, bad
      "<tool_call>\n{\"arguments\": {}, \"name\": \"a\", \"x\": 1}\n</tool_call>",  // unknown key
      "<tool_call>\nnot json\n</tool_call>",
      "<tool_call>\n{\"name\": 5, \"arguments\": {}}\n</tool_call>",
      "<tool_call>\n{\"name\": \"a\", \"arguments\": [1]}\n</tool_call>",
      "<tool_call>\n{\"name\": \"a\", \"bogus\": 1, \"arguments\": {}}\n</tool_call>",
      "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}",  // cut off
  };
  for (const auto& t : plain) {
    const auto r = parse(F::hermes, t);
    EXPECT_EQ(r.content, t);
    EXPECT_TRUE(r.calls.empty()) << t;
    expect_stream_agrees(F::hermes, t);
  }
}

TEST(ToolCallParse, HermesBrokenThenGood) {
  const std::string bad = "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": tru}}\n</tool_call>\n";
  const std::string good = "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>";
  const auto r = parse(F::hermes, bad + good);
  EXPECT_EQ(r.content, bad);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "b");
  // The broken call took an id in the stream; the good one is the second id.
  tool_call_ids ids(k_seed);
  ids.next();
  EXPECT_EQ(r.calls[0].id, ids.next());
  expect_stream_agrees(F::hermes, bad + good);
  // A marker inside broken text still counts.
  const std::string nested = "<tool_call>{\"name\": <tool_call>{\"name\": \"c\", \"arguments\": {}}</tool_call>";
  const auto n = parse(F::hermes, nested);
  EXPECT_EQ(n.content, "<tool_call>{\"name\": ");
  ASSERT_EQ(n.calls.size(), 1u);
  EXPECT_EQ(n.calls[0].name, "c");
  expect_stream_agrees(F::hermes, nested);
}

TEST(ToolCallParse, HermesLenientEdges) {
  // Missing closing tag, no arguments, extra keys, string arguments, trailing text.
  const std::string t =
      "<tool_call>{\"name\": \"a\", \"arguments\": {}}"
      "<tool_call>{\"name\": \"noargs\"}</tool_call>"
      "<tool_call>{\"id\": \"x1\", \"name\": \"s\", \"type\": \"function\", \"arguments\": \"{\\\"k\\\": \\\"v\\\"}\"}"
      "</tool_call> Done.";
  const auto r = parse(F::hermes, t);
  EXPECT_EQ(r.content, "Done.");
  ASSERT_EQ(r.calls.size(), 3u);
  EXPECT_EQ(r.calls[0].arguments, "{}");
  EXPECT_EQ(r.calls[1].name, "noargs");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  EXPECT_EQ(r.calls[2].name, "s");
  EXPECT_EQ(r.calls[2].arguments, R"({"k": "v"})");
  expect_stream_agrees(F::hermes, t);
}

TEST(ToolCallParse, UnicodeAndNestedBraces) {
  const std::string args =
      R"({"q": "caf\u00e9 \"{[}]\" 日本語 🎉", "n": {"deep": [1, 2.5e-3, {"x": null}], "t": true, "f": false},)"
      R"( "s": "\ud83d\ude00 \\ }"})";
  ASSERT_TRUE(is_json_object(args));
  const std::string t = "Über <tool_call>\n{\"name\": \"überprüfen\", \"arguments\": " + args + "}\n</tool_call>";
  const auto r = parse(F::hermes, t);
  EXPECT_EQ(r.content, "Über ");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "überprüfen");
  EXPECT_EQ(r.calls[0].arguments, args);
  expect_stream_agrees(F::hermes, t);
  // Escapes in the name are decoded.
  const auto e = parse(F::hermes, R"(<tool_call>{"name": "a\u00e9\ud83d\ude00", "arguments": {}}</tool_call>)");
  ASSERT_EQ(e.calls.size(), 1u);
  EXPECT_EQ(e.calls[0].name, "aé😀");
  // A lone surrogate is malformed.
  const std::string lone = R"(<tool_call>{"name": "a\ud83d", "arguments": {}}</tool_call>)";
  EXPECT_EQ(parse(F::hermes, lone).content, lone);
}

TEST(ToolCallParse, ArgumentsBeforeName) {
  // Not streamable: checked whole, then one arguments event (re-serialized).
  const std::string t = "<tool_call>\n{\"arguments\": {\"a\": [1, \"}\"]}, \"name\": \"f\"}\n</tool_call>x";
  const auto r = parse(F::hermes, t);
  EXPECT_EQ(r.content, "x");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "f");
  EXPECT_EQ(r.calls[0].arguments, R"({"a":[1,"}"]})");
  expect_stream_agrees(F::hermes, t);
  const std::string l = R"({"parameters": "{\"q\": 1}", "id": 3, "name": "g"})";
  const auto rl = parse(F::llama3_json, l);
  ASSERT_EQ(rl.calls.size(), 1u);
  EXPECT_EQ(rl.calls[0].arguments, R"({"q": 1})");
  expect_stream_agrees(F::llama3_json, l);
  const std::string g = R"({"tool_calls": [{"arguments": {}, "name": "a"}, {"name": "b", "arguments": {}}]})";
  const auto rg = parse(F::generic, g);
  ASSERT_EQ(rg.calls.size(), 2u);
  EXPECT_EQ(rg.calls[0].name, "a");
  EXPECT_EQ(rg.calls[0].arguments, "{}");
  expect_stream_agrees(F::generic, g);
}

// ---------------------------------------------------------------- llama3

TEST(ToolCallParse, Llama3) {
  const std::string one = R"({"name": "get_weather", "parameters": {"city": "Paris"}})";
  auto r = parse(F::llama3_json, one);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city": "Paris"})");
  expect_stream_agrees(F::llama3_json, one);

  const std::string tagged = "<|python_tag|>{\"name\": \"a\", \"arguments\": {\"x\": [1]}}; {\"name\": \"b\", "
                             "\"parameters\": {}}\n";
  r = parse(F::llama3_json, tagged);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].arguments, R"({"x": [1]})");
  EXPECT_EQ(r.calls[1].name, "b");
  expect_stream_agrees(F::llama3_json, tagged);
}

TEST(ToolCallParse, Llama3PlainContent) {
  const std::vector<std::string> plain = {
      "The weather is nice.",
      "  {\"name\": \"Bob\", \"age\": 3}",
      "{\"name\": \"Bob\"}",
      "Sure: {\"name\": \"a\", \"parameters\": {}}",
      "{\"name\": \"a\", \"parameters\": {\"x\": }}",
      "<|python_tag|>brave_search.call(query=\"x\")",
      "{\"name\": \"a\", \"parameters\": {\"x\": 1}",
      "{",
      "   ",
  };
  for (const auto& t : plain) {
    const auto r = parse(F::llama3_json, t);
    EXPECT_EQ(r.content, t);
    EXPECT_TRUE(r.calls.empty()) << t;
    expect_stream_agrees(F::llama3_json, t);
  }
  // A complete call stays a call; text after it is content.
  const std::string after = "{\"name\": \"a\", \"parameters\": {}} and more";
  const auto r = parse(F::llama3_json, after);
  EXPECT_EQ(r.content, "and more");
  EXPECT_EQ(r.calls.size(), 1u);
  expect_stream_agrees(F::llama3_json, after);
}

// ---------------------------------------------------------------- mistral

TEST(ToolCallParse, Mistral) {
  const std::string t =
      "I will call two tools.[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": \"]\"}, \"id\": \"abcDEF123\"}, "
      "{\"name\": \"b\", \"arguments\": {}}]";
  auto r = parse(F::mistral, t);
  EXPECT_EQ(r.content, "I will call two tools.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "a");
  EXPECT_EQ(r.calls[0].arguments, R"({"x": "]"})");
  EXPECT_EQ(r.calls[1].name, "b");
  expect_stream_agrees(F::mistral, t);

  const std::string v11 = "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]b[ARGS]{}";
  r = parse(F::mistral, v11);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_EQ(r.calls[1].name, "b");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  expect_stream_agrees(F::mistral, v11);

  for (const std::string bad : {"[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {]", "[TOOL_CALLS]", "[TOOL_CALL",
                                "[TOOL_CALLS]f[ARG]{}", "[TOOL_CALLS]{\"name\": \"a\"}", "plain [text]"}) {
    const auto b = parse(F::mistral, bad);
    EXPECT_EQ(b.content, bad);
    EXPECT_TRUE(b.calls.empty()) << bad;
    expect_stream_agrees(F::mistral, bad);
  }
}

// ---------------------------------------------------------------- generic

TEST(ToolCallParse, Generic) {
  const std::string two = R"({"tool_calls": [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]})";
  auto r = parse(F::generic, two);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].arguments, R"({"x": 1})");
  expect_stream_agrees(F::generic, two);

  const std::string single = "\n{\"tool_call\": {\"name\": \"a\", \"arguments\": {\"q\": \"}\"}}}\n";
  r = parse(F::generic, single);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"q": "}"})");
  expect_stream_agrees(F::generic, single);

  const std::string resp = R"({"response": "Hello \"you\"\n\u00e9 🎉"})";
  r = parse(F::generic, resp);
  EXPECT_EQ(r.content, "Hello \"you\"\né 🎉");
  EXPECT_TRUE(r.calls.empty());
  expect_stream_agrees(F::generic, resp);

  // Cut off inside the response: what came is the content.
  r = parse(F::generic, R"({"response": "Hel)");
  EXPECT_EQ(r.content, "Hel");
  expect_stream_agrees(F::generic, R"({"response": "Hel)");
}

TEST(ToolCallParse, ARepeatedCallIsDropped) {
  // The tool grammar lets a repeat through to end the list: the calls made
  // before it are the answer, numbered without a gap.
  const std::string generic = R"({"tool_calls": [{"name": "w", "arguments": {"city": "Paris"}}, {"name": "w", "arguments": {"city": "Rome"}}, )"
                              R"({"name": "w", "arguments": { "city" :"Paris"}}]})";
  auto r = parse(F::generic, generic);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_EQ(r.calls[1].arguments, R"({"city": "Rome"})");
  expect_stream_agrees(F::generic, generic);
  // Held while it may repeat, passed on once it differs: a longer string, another name, a prefix that was cut.
  const std::string differ = R"({"tool_calls": [{"name": "w", "arguments": {"city": "Paris"}}, {"name": "w", "arguments": {"city": "Paris_M2"}}, )"
                             R"({"name": "v", "arguments": {"city": "Paris"}}]})";
  r = parse(F::generic, differ);
  ASSERT_EQ(r.calls.size(), 3u);
  EXPECT_EQ(r.calls[1].arguments, R"({"city": "Paris_M2"})");
  EXPECT_EQ(r.calls[2].name, "v");
  expect_stream_agrees(F::generic, differ);
  // Whitespace inside strings counts.
  r = parse(F::generic, R"({"tool_calls": [{"name": "w", "arguments": {"q": "a b"}}, {"name": "w", "arguments": {"q": "a  b"}}]})");
  EXPECT_EQ(r.calls.size(), 2u);
  const std::string hermes = "<tool_call>\n{\"name\": \"w\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
                             "<tool_call>\n{\"name\": \"w\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  r = parse(F::hermes, hermes);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 1u);
  expect_stream_agrees(F::hermes, hermes);
  // A repeat cut by the length limit is a call cut short, as any other.
  tool_call_ids ids(k_seed);
  r = parse_tool_calls(F::hermes, hermes.substr(0, hermes.size() - 20), ids, /*cut=*/true);
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_FALSE(r.calls[1].complete);
}

TEST(ToolCallStream, ARepeatIsHeldBackNotStreamed) {
  tool_call_stream s(F::generic, k_seed);
  auto e = s.feed(R"({"tool_calls": [{"name": "w", "arguments": {"city": "Paris"}}, {"name": "w", "arguments": {"city": "Pa)");
  ASSERT_EQ(e.size(), 3u);  // the first call; the second may still repeat it
  EXPECT_EQ(e[2].type, ev::call_end);
  EXPECT_TRUE(s.feed(R"(ris"})").empty());
  e = s.feed("}]}");
  EXPECT_TRUE(e.empty()) << "the repeat is dropped";
  EXPECT_TRUE(s.finish().empty());
  tool_call_stream t(F::generic, k_seed);
  t.feed(R"({"tool_calls": [{"name": "w", "arguments": {"city": "Paris"}}, {"name": "w", "arguments": {"city": "Pa)");
  e = t.feed("x");
  ASSERT_GE(e.size(), 2u) << "it differs: the held events go out";
  EXPECT_EQ(e[0].type, ev::call_begin);
  EXPECT_EQ(e[0].index, 1);
  std::string args;
  for (size_t i = 1; i < e.size(); ++i) {
    EXPECT_EQ(e[i].type, ev::arguments);
    EXPECT_EQ(e[i].index, 1);
    args += e[i].text;
  }
  EXPECT_EQ(args, R"({"city": "Pax)");
}

TEST(ToolCallParse, GenericPlainContent) {
  for (const std::string t : {"Just text.", "{\"answer\": 42}", "{\"tool_calls\": {}}",
                              "{\"tool_calls\": [{\"name\": \"a\", \"arguments\": {\"x\": 1]}]}", "[1, 2]", ""}) {
    const auto r = parse(F::generic, t);
    EXPECT_EQ(r.content, t);
    EXPECT_TRUE(r.calls.empty()) << t;
    expect_stream_agrees(F::generic, t);
  }
}

// ---------------------------------------------------------------- streaming

TEST(ToolCallStream, EventsAndHeldBackMarker) {
  tool_call_stream s(F::hermes, k_seed);
  auto e = s.feed("Hi <tool_c");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].type, ev::content);
  EXPECT_EQ(e[0].text, "Hi ");
  e = s.feed("all>\n{\"name\": \"f\", \"arguments\": {\"a\"");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].type, ev::call_begin);
  EXPECT_EQ(e[0].index, 0);
  EXPECT_EQ(e[0].name, "f");
  EXPECT_EQ(e[0].id.substr(0, 5), "call_");
  EXPECT_EQ(e[1].type, ev::arguments);
  EXPECT_EQ(e[1].text, "{\"a\"");
  e = s.feed(": 1}}\n</tool_call>");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].text, ": 1}");
  EXPECT_EQ(e[1].type, ev::call_end);
  EXPECT_TRUE(e[1].complete);
  EXPECT_TRUE(s.finish().empty());
  EXPECT_TRUE(s.feed("more").empty());
}

TEST(ToolCallStream, GenericResponseStreamsAsContent) {
  tool_call_stream s(F::generic, k_seed);
  EXPECT_TRUE(s.feed(" {\"resp").empty());  // could still be a call
  auto e = s.feed("onse\": \"Hel");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].text, "Hel");
  e = s.feed("lo\\n\"}");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].text, "lo\n");
  EXPECT_TRUE(s.finish().empty());
  // Plain text is passed on at once.
  tool_call_stream p(F::generic, k_seed);
  e = p.feed("Hi");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].text, "Hi");
}

TEST(ToolCallStream, MistralArgsStream) {
  tool_call_stream s(F::mistral, k_seed);
  auto e = s.feed("[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Pa");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].type, ev::call_begin);
  EXPECT_EQ(e[0].name, "get_weather");
  EXPECT_EQ(e[1].text, "{\"city\": \"Pa");
  e = s.feed("ris\"}");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].text, "ris\"}");
  EXPECT_EQ(e[1].type, ev::call_end);
}

TEST(ToolCallStream, IncompleteCallEndsWithContent) {
  tool_call_stream s(F::hermes, k_seed);
  const std::string t = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1";
  auto e = s.feed(t);
  ASSERT_EQ(e.size(), 2u);
  e = s.finish();
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].type, ev::call_end);
  EXPECT_FALSE(e[0].complete);
  EXPECT_EQ(e[1].type, ev::content);
  EXPECT_EQ(e[1].text, t);
}

TEST(ToolCallStream, Utf8NotSplit) {
  tool_call_stream s(F::hermes, k_seed);
  const std::string t = "é🎉";
  std::string got;
  for (size_t i = 0; i < t.size(); ++i)
    for (const auto& e : s.feed(t.substr(i, 1))) {
      EXPECT_TRUE(e.text == "é" || e.text == "🎉") << e.text;
      got += e.text;
    }
  for (const auto& e : s.finish()) got += e.text;
  EXPECT_EQ(got, t);
  // An incomplete sequence at the very end is flushed by finish().
  tool_call_stream s2(F::generic, k_seed);
  EXPECT_TRUE(s2.feed("\xE6\x97").empty());
  const auto f = s2.finish();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].text, "\xE6\x97");
}

// Hostile input: random bytes built from format fragments never crash, and
// the stream still agrees with the whole parse.
TEST(ToolCallStream, RandomFragments) {
  const std::vector<std::string> frags = {
      "<tool_call>", "</tool_call>", "[TOOL_CALLS]", "[ARGS]", "<|python_tag|>", "{", "}", "[", "]", "\"", ":", ",",
      ";", " ", "\n", "\"name\"", "\"arguments\"", "\"parameters\"", "\"tool_calls\"", "\"response\"", "\"f\"",
      "\\", "\\u00e9", "\\ud83d", "1", "-0.5e3", "true", "null", "x", "é", "\xff", "\xe6"};
  std::mt19937 rng(123);
  for (int round = 0; round < 300; ++round) {
    std::string t;
    const int n = 1 + static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) t += frags[rng() % frags.size()];
    for (F f : {F::generic, F::hermes, F::llama3_json, F::mistral}) {
      const auto whole = parse(f, t);
      for (const auto& c : whole.calls) EXPECT_FALSE(c.name.empty());
      std::vector<std::string_view> pieces;
      for (size_t at = 0; at < t.size();) {
        const size_t k = std::min<size_t>(t.size() - at, 1 + rng() % 5);
        pieces.push_back(std::string_view(t).substr(at, k));
        at += k;
      }
      expect_same(whole, stream_pieces(f, pieces).out, t);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(ToolCallStream, BoundedHoldBack) {
  // A call longer than k_max_call_bytes is given up on: its text becomes content.
  tool_call_stream s(F::hermes, k_seed);
  size_t content_bytes = 0;
  auto count = [&](const tool_stream_events& es) {
    for (const auto& e : es)
      if (e.type == ev::content) content_bytes += e.text.size();
  };
  count(s.feed("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \""));
  const std::string chunk(4096, 'x');
  size_t fed = 0;
  while (fed < k_max_call_bytes + 8192) {
    count(s.feed(chunk));
    fed += chunk.size();
  }
  EXPECT_GT(content_bytes, k_max_call_bytes);
  count(s.finish());
}

}  // namespace
}  // namespace spate::api

// ---------------------------------------------------------------- cut by max_tokens

namespace spate::api {
namespace {

struct cut_case {
  F format;
  std::string text;
  std::string content;
  size_t n_complete, n_cut;
};

TEST(ToolCallParse, CutByTheLengthLimitLeaksNoCallSyntax) {
  const std::string a = R"({"name": "a", "arguments": {}})";
  const std::vector<cut_case> cases = {
      {F::generic, R"({"tool_calls": [{"name": "get_weather", "arguments": {")", "", 0, 1},
      {F::generic, R"({"tool_calls": [)" + a + R"(, {"name": "get_weather", "arguments": {"city)", "", 1, 1},
      {F::generic, R"({"tool_calls": [)" + a + R"(, {"name": "get_we)", "", 1, 0},
      {F::generic, R"({"tool_calls": [)" + a + ", ", "", 1, 0},
      {F::generic, R"({"tool_ca)", "", 0, 0},
      {F::generic, R"({"response": "Hel)", "Hel", 0, 0},
      {F::generic, R"({"response": {"temp": 2)", R"({"temp": 2)", 0, 0},
      {F::hermes, "Sure. <tool_call>\n{\"name\": \"a\", \"argu", "Sure. ", 0, 0},
      {F::hermes, "Sure. <tool_c", "Sure. ", 0, 0},
      {F::hermes, "<tool_call>\n" + a + "\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": [1", "", 1, 1},
      {F::mistral, "[TOOL_CALLS][" + a + ", {\"name\": \"b\", \"arguments\": {\"x\"", "", 1, 1},
      {F::llama3_json, R"({"name": "b", "parameters": {"x": 1)", "", 0, 1},
  };
  for (const auto& c : cases) {
    tool_call_ids ids(k_seed);
    const parsed_tool_output whole = parse_tool_calls(c.format, c.text, ids, /*cut=*/true);
    EXPECT_EQ(whole.content, c.content) << c.text;
    ASSERT_EQ(whole.calls.size(), c.n_complete + c.n_cut) << c.text;
    for (size_t i = 0; i < whole.calls.size(); ++i) EXPECT_EQ(whole.calls[i].complete, i < c.n_complete) << c.text;
    // The stream agrees at every split point: the same content, and the cut
    // call begun (its partial arguments streamed) then ended incomplete.
    for (size_t split = 0; split <= c.text.size(); ++split) {
      tool_call_stream st(c.format, k_seed);
      streamed s;
      tool_call cur;
      int open_index = -1;
      collect(st.feed(std::string_view(c.text).substr(0, split)), s, cur, open_index);
      collect(st.feed(std::string_view(c.text).substr(split)), s, cur, open_index);
      collect(st.finish(/*cut=*/true), s, cur, open_index);
      EXPECT_EQ(s.out.content, c.content) << c.text << " split at " << split;
      EXPECT_EQ(s.out.calls.size(), c.n_complete) << c.text;
      EXPECT_EQ(static_cast<size_t>(s.incomplete), c.n_cut) << c.text;
    }
  }
  // Not cut, the same texts keep the old leniency: a broken call is content.
  const auto r = parse(F::generic, R"({"tool_calls": [)" + a + R"(, {"name": "get_we)");
  EXPECT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.content, R"(, {"name": "get_we)");
}

TEST(ToolCallParse, GenericResponseValueIsContentAsWritten) {
  for (const std::string v : {"42", "{\"temp\": 21}", "[1, {\"a\": \"}\"}]", "true"}) {
    const std::string t = "{\"response\": " + v + "}";
    const auto r = parse(F::generic, t);
    EXPECT_EQ(r.content, v);
    EXPECT_TRUE(r.calls.empty());
    expect_stream_agrees(F::generic, t);
  }
}

}  // namespace
}  // namespace spate::api
