// Tool-call formats: names, detection from a chat template, call syntax for
// grammars, call ids, the generic format's system prompt, and the whole-output
// parse (which runs the stream parser of tool_calls_stream.cpp through
// output_parser.h).
#include "protocol/tool_calls.h"

#include <array>
#include <utility>

#include "protocol/output_parser.h"

namespace spate::api {

namespace json = boost::json;

std::optional<tool_call_format> tool_call_format_from_name(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, tool_call_format>, 11> k_names{{
      {"hermes", tool_call_format::hermes},
      {"qwen", tool_call_format::hermes},
      {"qwen2_5", tool_call_format::hermes},
      {"llama3_json", tool_call_format::llama3_json},
      {"llama3", tool_call_format::llama3_json},
      {"llama3_1", tool_call_format::llama3_json},
      {"llama4_json", tool_call_format::llama3_json},
      {"mistral", tool_call_format::mistral},
      {"generic", tool_call_format::generic},
      {"json", tool_call_format::generic},
      {"openai", tool_call_format::openai},
  }};
  for (const auto& [n, f] : k_names)
    if (n == name) return f;
  return std::nullopt;
}

const char* tool_call_format_name(tool_call_format f) {
  switch (f) {
    case tool_call_format::generic: return "generic";
    case tool_call_format::hermes: return "hermes";
    case tool_call_format::llama3_json: return "llama3_json";
    case tool_call_format::mistral: return "mistral";
    case tool_call_format::openai: return "openai";
  }
  return "generic";
}

tool_call_format detect_tool_call_format(std::string_view src) {
  const auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  if (has("<|channel|>")) return tool_call_format::openai;
  if (has("<tool_call>")) return tool_call_format::hermes;
  if (has("[TOOL_CALLS]")) return tool_call_format::mistral;
  if (has("<|start_header_id|>") && has("\"parameters\"") && (has("Environment: ipython") || has("<|python_tag|>")))
    return tool_call_format::llama3_json;
  return tool_call_format::generic;
}

tool_call_syntax syntax_of(tool_call_format f) {
  tool_call_syntax s;
  switch (f) {
    case tool_call_format::hermes:
      s.text_before_calls = true;
      s.call_prefix = "<tool_call>\n";
      s.call_suffix = "\n</tool_call>";
      s.list_sep = "\n";
      break;
    case tool_call_format::llama3_json:
      s.list_sep = "; ";
      s.args_key = "parameters";
      break;
    case tool_call_format::mistral:
      s.text_before_calls = true;
      s.list_open = "[TOOL_CALLS][";
      s.list_sep = ", ";
      s.list_close = "]";
      break;
    case tool_call_format::generic:
      s.list_open = "{\"tool_calls\": [";
      s.list_sep = ", ";
      s.list_close = "]}";
      break;
    case tool_call_format::openai: break;  // harmony: no list syntax (harmony.h)
  }
  return s;
}

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::string tool_call_ids::next() {
  static constexpr std::string_view k_alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  uint64_t state = seed_ ^ (0xD1B54A32D192ED03ull * ++count_);
  std::string id = "call_";
  uint64_t bits = 0;
  for (int i = 0; i < 24; ++i) {
    if (i % 8 == 0) bits = splitmix64(state);
    id += k_alphabet[(bits & 0xFF) % k_alphabet.size()];
    bits >>= 8;
  }
  return id;
}

std::string generic_tool_system_prompt(const json::array& tools, bool parallel_tool_calls, bool call_required,
                                       std::string_view direct_answer) {
  std::string out = "You can call the following tools (name, description and JSON schema of the arguments):\n";
  for (const auto& t : tools) {
    const auto* obj = t.if_object();
    const auto* type = obj ? obj->if_contains("type") : nullptr;
    const auto* fn = obj ? obj->if_contains("function") : nullptr;
    if (!type || !type->is_string() || type->get_string() != "function" || !fn || !fn->is_object()) continue;
    json::object d;
    for (const char* k : {"name", "description", "parameters"})
      if (const auto* v = fn->get_object().if_contains(k)) d[k] = *v;
    out += json::serialize(d);
    out += '\n';
  }
  out += "\nAnswer with a single JSON object and nothing else.\n";
  out += call_required ? "You must call " : "To call ";
  out += parallel_tool_calls ? "one or more tools" : "a tool (exactly one per answer)";
  out += call_required ? ", answering:\n" : ", answer:\n";
  out += "{\"tool_calls\": [{\"name\": \"<tool name>\", ";
  out += "\"arguments\": {<the arguments, as the tool's schema describes>}}";
  out += parallel_tool_calls ? ", ...]}\n" : "]}\n";
  if (call_required) return out;
  if (!direct_answer.empty()) return out + std::string(direct_answer);
  out += "To answer the user directly instead, answer:\n{\"response\": \"<your answer>\"}\n";
  return out;
}

void add_system_prompt(json::array& messages, std::string_view prompt) {
  if (!messages.empty() && messages[0].is_object()) {
    auto& first = messages[0].get_object();
    const auto* role = first.if_contains("role");
    auto* content = first.if_contains("content");
    if (role && role->is_string() && role->get_string() == "system" && content) {
      // The prompt first: the caller's system text may change from turn to
      // turn (memory, retrieved context), the tools rarely; the prefix cache
      // then keeps the tools' prefill.
      if (content->is_string()) {
        std::string text(prompt);
        if (!content->get_string().empty()) text += "\n\n" + std::string(content->get_string());
        *content = json::string(text);
        return;
      }
      if (content->is_array()) {
        json::array& parts = content->get_array();
        std::string text(prompt);
        if (!parts.empty()) text += "\n\n";
        parts.insert(parts.begin(), json::object{{"type", "text"}, {"text", json::string(text)}});
        return;
      }
    }
  }
  messages.insert(messages.begin(), json::object{{"role", "system"}, {"content", json::string(prompt)}});
}

parsed_tool_output parse_tool_calls(tool_call_format f, std::string_view text, tool_call_ids& ids, bool cut) {
  output_format of;
  of.tools = f;
  parsed_output p = parse_output(of, text, ids, cut);
  return parsed_tool_output{std::move(p.content), std::move(p.calls)};
}

}  // namespace spate::api
