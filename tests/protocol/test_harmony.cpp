// The harmony output parser (protocol/harmony.h) through output_parser.h:
// channels to reasoning, content and calls, the two places of a recipient,
// leniency (missing "<|start|>", missing "<|end|>", garbage, an unclosed
// analysis at the length limit), and that streaming at every cut of the text
// gives what the whole text gives, with no partial marker let out.
#include "protocol/harmony.h"

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "protocol/output_parser.h"

namespace spate::api {
namespace {

constexpr uint64_t k_seed = 7;

output_format harmony_format(bool reasoning = true, bool calls = true, std::optional<std::string> open_header = std::nullopt) {
  output_format f;
  harmony_options o;
  o.reasoning = reasoning;
  o.open_header = std::move(open_header);
  f.harmony = o;
  if (calls) f.tools = tool_call_format::openai;
  return f;
}

parsed_output parse(const output_format& f, std::string_view text, bool cut = false) {
  tool_call_ids ids(k_seed);
  return parse_output(f, text, ids, cut);
}

struct call_want {
  std::string name, arguments;
};

struct parse_case {
  std::string name;
  std::string text;
  std::optional<std::string> reasoning;  // nullopt: no reasoning part
  std::string content;
  std::vector<call_want> calls;
  output_format format = harmony_format();
};

const std::string k_analysis = "<|channel|>analysis<|message|>";
const std::string k_next = "<|end|><|start|>assistant";
const std::string k_final = "<|channel|>final<|message|>";

std::vector<parse_case> cases() {
  return {
      {"analysis_then_final", k_analysis + "Think.\n" + k_next + k_final + "The answer is 4.", "Think.\n", "The answer is 4.", {}},
      {"final_only_with_return", k_final + "Hi!<|return|>", std::nullopt, "Hi!", {}},
      {"call_recipient_after_channel",
       k_analysis + "Need weather." + k_next +
           "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}",
       "Need weather.", "", {{"get_weather", "{\"city\": \"Paris\"}"}}},
      {"call_recipient_in_role", k_analysis + "x" + k_next + " to=functions.f<|channel|>commentary json<|message|>{}<|call|>", "x", "",
       {{"f", "{}"}}},
      {"call_as_first_message", " to=functions.f<|channel|>commentary json<|message|> {\"a\": [1, 2]} \n", std::nullopt, "",
       {{"f", "{\"a\": [1, 2]}"}}},
      {"call_on_analysis_channel", "<|channel|>analysis to=functions.f <|constrain|>json<|message|>{\"q\": 1}", std::nullopt, "",
       {{"f", "{\"q\": 1}"}}},
      {"two_calls", "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1}<|call|><|start|>assistant"
                    "<|channel|>commentary to=functions.g <|constrain|>json<|message|>{\"b\": 2}<|call|>",
       std::nullopt, "", {{"f", "{\"a\": 1}"}, {"g", "{\"b\": 2}"}}},
      {"preamble_is_content", "<|channel|>commentary<|message|>Let me check." + k_next +
                                  "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}",
       std::nullopt, "Let me check.", {{"f", "{}"}}},
      {"two_analyses_concatenate", k_analysis + "a" + k_next + k_analysis + "b" + k_next + k_final + "c", "ab", "c", {}},
      {"missing_start", k_analysis + "a<|end|>" + k_final + "b", "a", "b", {}},
      {"missing_end", k_analysis + "a<|start|>assistant" + k_final + "b", "a", "b", {}},
      {"missing_end_and_start", k_analysis + "a" + k_final + "b", "a", "b", {}},
      {"unclosed_analysis", k_analysis + "still thinking", "still thinking", "", {}},
      {"empty_analysis", k_analysis + k_next + k_final + "x", "", "x", {}},
      {"garbage_is_content", "Hello <b>world</b> | <|not a marker|>", std::nullopt, "Hello <b>world</b> | <|not a marker|>", {}},
      {"garbage_after_a_message", k_final + "a<|end|>\n  trailing text \n", std::nullopt, "a\n  trailing text", {}},
      {"markers_in_text", k_final + "a <|message|> b <|constrain|> c < d <| e", std::nullopt,
       "a <|message|> b <|constrain|> c < d <| e", {}},
      {"partial_marker_at_end", k_final + "x <|en", std::nullopt, "x <|en", {}},
      // A broken header is content; a later "<|message|>" still opens a message.
      {"bad_header_byte", "<|channel|>fin\nal<|message|>x", std::nullopt, "<|channel|>fin\nalx", {}},
      {"long_header", "<|channel|>" + std::string(300, 'a') + "<|message|>x", std::nullopt, "<|channel|>" + std::string(300, 'a') + "x", {}},
      {"builtin_tool_dropped", "<|channel|>analysis to=browser.search <|constrain|>json<|message|>{\"query\": \"x\"}", std::nullopt, "", {}},
      {"other_role_dropped", k_final + "a<|end|><|start|>user<|message|>fake user turn", std::nullopt, "a", {}},
      {"to_assistant_is_no_recipient", "<|channel|>commentary to=assistant<|message|>hi", std::nullopt, "hi", {}},
      {"no_channel_is_content", "<|message|>plain", std::nullopt, "plain", {}},
      {"header_left_open", k_analysis + "r" + k_next + "<|channel|>fin", "r", "", {}},
      {"first_header_that_is_text", " t", std::nullopt, " t", {}},
      {"calls_off", "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}" + k_next + k_final + "done", std::nullopt,
       "done", {}, harmony_format(true, false)},
      {"reasoning_off", k_analysis + "secret" + k_next + k_final + "shown", std::nullopt, "shown", {}, harmony_format(false, true)},
      {"open_final_message", "continued text", std::nullopt, "continued text", {},
       harmony_format(true, true, "assistant<|channel|>final")},
      {"open_analysis_message", "more thought" + k_next + k_final + "x", "more thought", "x", {},
       harmony_format(true, true, "assistant<|channel|>analysis")},
  };
}

void expect_parse(const parsed_output& got, const parse_case& c, const std::string& where) {
  EXPECT_EQ(got.has_reasoning, c.reasoning.has_value()) << where;
  EXPECT_EQ(got.reasoning, c.reasoning.value_or("")) << where;
  EXPECT_EQ(got.content, c.content) << where;
  ASSERT_EQ(got.calls.size(), c.calls.size()) << where;
  for (size_t i = 0; i < c.calls.size(); ++i) {
    EXPECT_EQ(got.calls[i].name, c.calls[i].name) << where;
    EXPECT_EQ(got.calls[i].arguments, c.calls[i].arguments) << where;
    EXPECT_TRUE(got.calls[i].complete) << where;
    EXPECT_EQ(got.calls[i].id.size(), 29u) << where;
  }
}

TEST(HarmonyParse, ChannelsRecipientsAndLeniency) {
  for (const auto& c : cases()) expect_parse(parse(c.format, c.text), c, c.name);
}

// What a stream gives fed pieces: the same shape as a whole parse.
parsed_output stream(const output_format& f, const std::vector<std::string>& pieces, bool cut = false) {
  output_parser p(f, tool_call_ids(k_seed));
  output_events events;
  for (const auto& piece : pieces) {
    for (auto& e : p.feed(piece)) events.push_back(std::move(e));
  }
  for (auto& e : p.finish(cut)) events.push_back(std::move(e));
  parsed_output out;
  tool_call cur;
  bool in_reasoning = false;
  for (const auto& e : events) {
    using k = output_event::kind;
    switch (e.type) {
      case k::reasoning_begin:
        EXPECT_FALSE(in_reasoning);
        in_reasoning = out.has_reasoning = true;
        break;
      case k::reasoning:
        EXPECT_TRUE(in_reasoning);
        EXPECT_FALSE(e.text.empty());
        out.reasoning += e.text;
        break;
      case k::reasoning_end:
        EXPECT_TRUE(in_reasoning);
        in_reasoning = false;
        break;
      case k::content: out.content += e.text; break;
      case k::call_begin: cur = tool_call{e.id, e.name, {}}; break;
      case k::arguments: cur.arguments += e.text; break;
      case k::call_end:
        cur.complete = e.complete;
        if (e.complete || cut) out.calls.push_back(cur);
        break;
    }
  }
  EXPECT_FALSE(in_reasoning) << "every reasoning part ends";
  return out;
}

TEST(HarmonyParse, StreamedEqualsWholeAtEveryCut) {
  for (const auto& c : cases()) {
    for (size_t i = 0; i <= c.text.size(); ++i) {
      for (size_t j = i; j <= c.text.size(); j += 2) {
        const std::string where = c.name + " cut " + std::to_string(i) + "," + std::to_string(j);
        expect_parse(stream(c.format, {c.text.substr(0, i), c.text.substr(i, j - i), c.text.substr(j)}), c, where);
        if (HasFailure()) return;
      }
    }
  }
}

// Random soups of markers, marker fragments, words and whitespace: never a
// crash, and the stream cut anywhere gives the whole parse.
TEST(HarmonyParse, RandomOutputsStreamLikeTheWhole) {
  static const std::vector<std::string> k_bits = {
      "<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>", "<|call|>", "<|return|>", "<|", "|>", "<",
      "assistant", "analysis", "final", "commentary", " to=functions.f", " to=browser.x", "json", " ", "\n", "{\"a\": 1}",
      "text", "\xc3\xa9", "user"};
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 400; ++iter) {
    std::string text;
    const size_t n = rng() % 24;
    for (size_t k = 0; k < n; ++k) text += k_bits[rng() % k_bits.size()];
    for (const bool cut : {false, true}) {
      const output_format f = harmony_format(iter % 3 != 0, iter % 2 == 0);
      const parsed_output whole = parse(f, text, cut);
      const size_t i = text.empty() ? 0 : rng() % (text.size() + 1);
      const size_t j = i + (text.size() == i ? 0 : rng() % (text.size() - i + 1));
      const parsed_output s = stream(f, {text.substr(0, i), text.substr(i, j - i), text.substr(j)}, cut);
      ASSERT_EQ(s.has_reasoning, whole.has_reasoning) << text;
      ASSERT_EQ(s.reasoning, whole.reasoning) << text;
      ASSERT_EQ(s.content, whole.content) << text;
      ASSERT_EQ(s.calls.size(), whole.calls.size()) << text;
      for (size_t c = 0; c < s.calls.size(); ++c) ASSERT_EQ(s.calls[c].arguments, whole.calls[c].arguments) << text;
    }
  }
}

TEST(HarmonyParse, OneByteAtATimeNeverLetsAPartialMarkerOut) {
  const std::string text = k_analysis + "r<" + k_next + k_final + "a<|b";
  output_parser p(harmony_format(), tool_call_ids(k_seed));
  std::string seen;
  for (size_t i = 0; i < text.size(); ++i) {
    for (const auto& e : p.feed(text.substr(i, 1))) seen += e.text;
    for (const std::string_view m : {k_harmony_start, k_harmony_channel, k_harmony_message, k_harmony_end}) {
      EXPECT_EQ(seen.find(m), std::string::npos) << seen;
    }
    if (i + 2 == text.size()) {
      EXPECT_EQ(seen, "r<a") << "\"<|\" held until it cannot be a marker";
    }
  }
  for (const auto& e : p.finish(false)) seen += e.text;
  EXPECT_EQ(seen, "r<a<|b");
}

TEST(HarmonyParse, CutByTheLengthLimit) {
  const output_format f = harmony_format();
  // An open call keeps the arguments written so far, incomplete; the held partial marker is dropped.
  const std::string text = "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": <|";
  parsed_output p = parse(f, text, /*cut=*/true);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_FALSE(p.calls[0].complete);
  EXPECT_EQ(p.calls[0].arguments, "{\"a\":");
  EXPECT_EQ(p.content, "");
  // An unclosed analysis is reasoning, whether cut or not.
  p = parse(f, k_analysis + "half a thou", true);
  EXPECT_TRUE(p.has_reasoning);
  EXPECT_EQ(p.reasoning, "half a thou");
  // Streamed: the call ends incomplete, the reasoning part ends (not by its marker).
  output_parser s(f, tool_call_ids(k_seed));
  s.feed(text);
  const output_events end = s.finish(true);
  ASSERT_FALSE(end.empty());
  EXPECT_EQ(end.back().type, output_event::kind::call_end);
  EXPECT_FALSE(end.back().complete);
  output_parser r(f, tool_call_ids(k_seed));
  EXPECT_TRUE(r.feed(k_analysis + "x").size() == 2u && r.in_reasoning());
  const output_events rend = r.finish(false);
  ASSERT_EQ(rend.size(), 1u);
  EXPECT_EQ(rend[0].type, output_event::kind::reasoning_end);
  EXPECT_FALSE(rend[0].complete);
  EXPECT_FALSE(r.in_reasoning());
}

TEST(HarmonyParse, CallIdsFollowTheSeedAndTheReasoningEndsByItsMarker) {
  const std::string text = k_analysis + "a" + k_next + "<|channel|>commentary to=functions.f<|message|>{}";
  output_parser p(harmony_format(), tool_call_ids(k_seed));
  const output_events evs = p.feed(text);
  tool_call_ids ids(k_seed);
  ASSERT_EQ(evs.size(), 5u);  // reasoning_begin, reasoning, reasoning_end, call_begin, arguments
  EXPECT_EQ(evs[2].type, output_event::kind::reasoning_end);
  EXPECT_TRUE(evs[2].complete);
  EXPECT_EQ(evs[3].id, ids.next());
  EXPECT_EQ(evs[3].name, "f");
}

TEST(HarmonyParse, AnotherToolFormatParsesTheContent) {
  // --reasoning-parser openai_gptoss with --tool-call-parser hermes: calls come from the final message's text.
  output_format f = harmony_format();
  f.tools = tool_call_format::hermes;
  const parsed_output p = parse(f, k_analysis + "r" + k_next + k_final + "ok <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");
  EXPECT_EQ(p.reasoning, "r");
  EXPECT_EQ(p.content, "ok ");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "f");
}

TEST(HarmonyHeader, WordsOfAHeader) {
  harmony_header h = parse_harmony_header("assistant to=functions.f<|channel|>commentary json", true);
  EXPECT_EQ(h.role, "assistant");
  EXPECT_EQ(h.recipient, "functions.f");
  EXPECT_EQ(h.channel, "commentary");
  EXPECT_EQ(h.content_type, "json");
  h = parse_harmony_header("<|channel|>commentary to=functions.g <|constrain|>json", false);
  EXPECT_EQ(h.role, "");
  EXPECT_EQ(h.recipient, "functions.g");
  EXPECT_EQ(h.channel, "commentary");
  EXPECT_EQ(h.content_type, "json");
  h = parse_harmony_header("<|channel|>final to=assistant", false);
  EXPECT_EQ(h.channel, "final");
  EXPECT_EQ(h.recipient, "");
}

TEST(HarmonyHeader, TheMessageAPromptLeavesOpen) {
  EXPECT_EQ(harmony_open_header("<|start|>user<|message|>hi<|end|><|start|>assistant"), std::nullopt);
  EXPECT_EQ(harmony_open_header("<|start|>user<|message|>hi<|end|><|start|>assistant<|channel|>final<|message|>Hel"),
            std::optional<std::string>("assistant<|channel|>final"));
  EXPECT_EQ(harmony_open_header("<|start|>assistant<|channel|>final<|message|>done<|return|>"), std::nullopt);
  EXPECT_EQ(harmony_open_header("no harmony at all"), std::nullopt);
}

}  // namespace
}  // namespace spate::api
