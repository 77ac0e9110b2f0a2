#include "protocol/generation.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "jinja/chat_template.h"
#include "protocol/constraint_compiler.h"
#include "protocol/harmony_constraint.h"
#include "protocol/reasoning_constraint.h"
#include "protocol/tool_calls.h"
#include "protocol/tool_grammar.h"
#include "tokenizer/tokenizer.h"

namespace spate {

namespace {

namespace json = boost::json;

api::api_error bad(std::string msg, std::string param = "", std::string code = "") {
  api::api_error e;
  e.status = 400;
  e.message = std::move(msg);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

// The OpenAI wording of a failed check; prompt_param: "prompt" or "messages".
std::optional<api::api_error> openai_check_error(const generation_check& c, const std::string& prompt_param) {
  using o = generation_check::outcome;
  const std::string limit = "This model's maximum context length is " + std::to_string(c.max_model_len) + " tokens. ";
  switch (c.result) {
    case o::ok: return std::nullopt;
    case o::empty_prompt: return bad("the prompt is empty", prompt_param);
    case o::token_out_of_range:
      return bad("prompt token id " + std::to_string(c.bad_token) + " is outside the vocabulary [0, " + std::to_string(c.n_vocab) + ")",
                 "prompt");
    case o::no_room:
      return bad(limit + "However, your prompt has " + std::to_string(c.n_prompt) +
                     " tokens, which leaves no room for a completion. Please reduce the length of the prompt.",
                 prompt_param, "context_length_exceeded");
    case o::invalid_params:
      // validate() names the field first: "temperature must be in [0, 2], got -1".
      return bad(c.message, c.message.substr(0, c.message.find(' ')));
    case o::too_long:
      return bad(limit + "However, you requested " + std::to_string(c.n_prompt + c.max_tokens) + " tokens (" +
                     std::to_string(c.n_prompt) + " in the prompt, " + std::to_string(c.max_tokens) +
                     " for the completion). Please reduce the length of the prompt or max_tokens.",
                 "max_tokens", "context_length_exceeded");
  }
  return std::nullopt;
}

}  // namespace

generation_check check_generation(const std::vector<int32_t>& prompt, sampling_params& params, std::optional<int32_t> default_max_tokens,
                                  int32_t n_vocab, int32_t max_model_len) {
  using o = generation_check::outcome;
  generation_check c;
  c.n_prompt = static_cast<int32_t>(prompt.size());
  c.max_model_len = max_model_len;
  c.n_vocab = n_vocab;
  if (prompt.empty()) {
    c.result = o::empty_prompt;
    return c;
  }
  for (int32_t t : prompt) {
    if (t < 0 || t >= n_vocab) {
      c.result = o::token_out_of_range;
      c.bad_token = t;
      return c;
    }
  }
  const int32_t room = max_model_len - c.n_prompt;
  if (room < 1) {
    c.result = o::no_room;
    return c;
  }
  if (!params.max_tokens) params.max_tokens = default_max_tokens ? std::min(*default_max_tokens, room) : room;
  c.max_tokens = *params.max_tokens;
  if (auto err = validate(params, n_vocab); !err.empty()) {
    c.result = o::invalid_params;
    c.message = std::move(err);
    return c;
  }
  if (c.max_tokens > room) c.result = o::too_long;
  return c;
}

std::vector<int32_t> encode_prompt(const tokenizer& tok, std::string_view text) {
  return tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
}

namespace {

// What the generic format's system prompt says about a direct answer when a
// response format constrains it (empty: the plain {"response": "..."}).
std::string direct_answer_instructions(const api::output_constraint& c) {
  using k = api::output_constraint::kind;
  switch (c.type) {
    case k::json_schema:
      return "To answer the user directly instead, answer:\n{\"response\": <your answer, a JSON value valid against this schema: " +
             json::serialize(c.schema) + ">}\n";
    case k::json_object: return "To answer the user directly instead, answer:\n{\"response\": <your answer, as a JSON object>}\n";
    case k::none: return "";
    default: return "To answer the user directly instead, answer in the required format only.\n";
  }
}

// Tool use: the generic format describes the tools in a system message and
// gets past calls back as the JSON it asks for. Every tool_choice but none
// constrains the output (tool_grammar.h): required and named to calls (a
// response format is then ignored, as the answer is calls alone), auto to
// calls or a direct answer, which the response format constrains when there
// is one. The request's constraint becomes the tools' one.
std::optional<api::api_error> prepare_tool_use(const api::served_model& m, const api::parsed_request& r, json::array& messages,
                                               api::output_constraint& constraint) {
  const api::tool_request& t = r.tool_use;
  using choice = api::tool_request::choice;
  const bool generic = m.tool_format == api::tool_call_format::generic;
  const api::output_constraint answer = t.mode == choice::automatic ? constraint : api::output_constraint{};
  if (generic) {
    for (json::value& msg : messages) {
      json::object& o = msg.as_object();
      const json::value* calls = o.if_contains("tool_calls");
      if (!calls || !calls->is_array() || o.at("role") != "assistant") continue;
      json::array shown;
      for (const json::value& c : calls->as_array()) {
        const json::value* f = c.is_object() ? c.as_object().if_contains("function") : nullptr;
        const json::object* fn = f ? f->if_object() : nullptr;
        if (fn && fn->contains("name")) shown.push_back(json::object{{"name", fn->at("name")}, {"arguments", fn->contains("arguments") ? fn->at("arguments") : json::object()}});
      }
      o["content"] = json::serialize(json::object{{"tool_calls", std::move(shown)}});
    }
    api::add_system_prompt(messages, api::generic_tool_system_prompt(t.tools, t.parallel, t.mode != choice::automatic,
                                                                     direct_answer_instructions(answer)));
  }
  api::output_constraint tools;
  tools.type = api::output_constraint::kind::tool_calls;
  tools.schema = api::tool_grammar_spec(t, m.tool_format, answer);
  tools.param = "tools";
  constraint = std::move(tools);
  return std::nullopt;
}

}  // namespace

// The prompts after the first of a completions request: tokenized and each
// checked against the context with the first prompt's effective max_tokens.
static std::optional<api::api_error> prepare_more_prompts(const api::served_model& m, const api::parsed_request& r, prepared_generation& out) {
  out.more_prompts.clear();
  out.more_prompts.reserve(r.more_prompts.size());
  for (size_t i = 0; i < r.more_prompts.size(); ++i) {
    const auto& in = r.more_prompts[i];
    prepared_generation::extra_prompt e;
    if (in.ids) {
      e.ids = *in.ids;
    } else {
      e.text = in.text.value_or("");
      e.ids = encode_prompt(*m.tok, e.text);
    }
    sampling_params p = out.params;  // max_tokens already set by the first prompt's check
    const generation_check c = check_generation(e.ids, p, std::nullopt, m.n_vocab, m.max_model_len);
    if (auto err = openai_check_error(c, "prompt[" + std::to_string(i + 1) + "]")) return err;
    out.more_prompts.push_back(std::move(e));
  }
  return std::nullopt;
}

namespace {

// Earlier assistant turns for a harmony template, as llama.cpp passes them:
// the reasoning (reasoning_content, or vLLM's reasoning, which parsing
// copied there) becomes "thinking", the field gpt-oss's template reads; with
// tool calls the content then goes (the template takes the analysis before a
// call from one or the other, and refuses both).
void harmony_messages(json::array& messages) {
  for (json::value& v : messages) {
    json::object& msg = v.as_object();
    const json::value* reasoning = msg.if_contains("reasoning_content");
    if (msg.at("role") != "assistant" || !reasoning || !reasoning->is_string() || msg.contains("thinking")) continue;
    msg["thinking"] = *reasoning;
    if (msg.contains("tool_calls")) msg.erase("content");
  }
}

// gpt-oss's template writes every function's description ("// " +
// description), which Jinja2 refuses when it is missing or null: an empty one.
void harmony_tools(json::object& extra) {
  json::value* tools = extra.if_contains("tools");
  if (!tools || !tools->is_array()) return;
  for (json::value& t : tools->as_array()) {
    json::value* fn = t.is_object() ? t.as_object().if_contains("function") : nullptr;
    if (!fn || !fn->is_object()) continue;
    const json::value* d = fn->as_object().if_contains("description");
    if (!d || d->is_null()) fn->as_object()["description"] = "";
  }
}

// The harmony constraint (harmony_constraint.h): the request's grammar (in
// out.params.constraint) for the final message; with tools in the openai
// format, each function's parameters for its calls' arguments.
std::optional<api::api_error> constrain_harmony(const api::served_model& m, const api::parsed_request& r, bool calls,
                                                prepared_generation& out) {
  api::harmony_constraints c;
  c.answer = std::move(out.params.constraint);
  const api::tool_request& t = r.tool_use;
  if (calls) {
    c.call_required = t.mode == api::tool_request::choice::required || t.mode == api::tool_request::choice::named;
    for (const json::value& tool : t.tools) {
      const json::object& fn = tool.at("function").as_object();
      const std::string name(fn.at("name").as_string());
      if (t.mode == api::tool_request::choice::named && name != t.name) continue;
      std::shared_ptr<const constraint_spec> args;
      if (m.constraints) {
        api::output_constraint schema;
        schema.type = api::output_constraint::kind::json_schema;
        const json::value* params = fn.if_contains("parameters");
        schema.schema = params && !params->is_null() ? *params : json::value(json::object{{"type", "object"}});
        schema.param = "tools";
        std::optional<api::api_error> err;
        args = m.constraints->compile(schema, err);
        if (err) return err;
      }
      c.calls.emplace_back(name, std::move(args));
    }
  }
  c.reasoning_budget = r.thinking_token_budget;
  const bool grammars = std::any_of(c.calls.begin(), c.calls.end(), [](const auto& fn) { return fn.second != nullptr; });
  if (!c.answer && !c.call_required && !grammars && !c.reasoning_budget) return std::nullopt;
  if (!m.harmony_tokens) return bad("constrained decoding of harmony output needs the model's harmony tokens", "messages");
  out.params.constraint = api::make_harmony_constraint(std::move(c), *out.harmony, m.harmony_tokens);
  return std::nullopt;
}

// Chat and responses: the prompt from the chat template, its tokens, and
// where the output starts for the reasoning parser (out.reasoning) or the
// harmony parser (out.harmony).
std::optional<api::api_error> render_chat(const api::served_model& m, const api::parsed_request& r, const json::array& messages,
                                          bool harmony, prepared_generation& out) {
  if (!m.tmpl) {
    return bad(m.tmpl_error.empty() ? "this model has no chat template; pass --chat-template FILE or use /v1/completions"
                                      : "the chat template could not be parsed: " + m.tmpl_error,
               "messages", "chat_template_missing");
  }
  chat_template_options o;
  o.add_generation_prompt = r.add_generation_prompt;
  o.extra_context = r.template_extra;
  if (harmony) harmony_tools(o.extra_context);
  try {
    out.prompt_text = m.tmpl->render(messages, o);
    if (r.continue_final_message) {
      if (auto e = cut_after_final_message(messages, out.prompt_text)) return e;
    }
  } catch (const chat_template_error& e) {
    return bad(std::string("chat template error: ") + e.what(), "messages", "chat_template_error");
  } catch (const std::exception& e) {
    return bad(std::string("chat template error: ") + e.what(), "messages", "chat_template_error");
  }
  out.prompt = m.tok->encode(out.prompt_text, /*add_special=*/false, /*parse_special=*/true);
  if (harmony) {
    api::harmony_options h;
    h.reasoning = m.reasoning == api::reasoning_parser::openai_gptoss;
    h.open_header = api::harmony_open_header(out.prompt_text);
    out.harmony = std::move(h);
  } else if (m.reasoning != api::reasoning_parser::none) {
    std::string continued;
    if (r.continue_final_message) continued = std::string(messages.back().as_object().at("content").as_string());
    out.reasoning = api::reasoning_start_of(m.reasoning, out.prompt_text, r.template_extra,
                                            r.continue_final_message ? &continued : nullptr);
  }
  return std::nullopt;
}

// Harmony calls (tools in the openai format) get their grammars from the harmony constraint.
bool harmony_calls(const api::served_model& m, const api::parsed_request& r, bool harmony) {
  return harmony && r.tool_use.active() && m.tool_format == api::tool_call_format::openai;
}

}  // namespace

std::optional<api::api_error> render_chat_prompt(const api::served_model& m, const api::parsed_request& r, prepared_generation& out,
                                                 api::output_constraint& constraint) {
  const bool harmony = m.harmony_output(r.tool_use.active());
  json::array adjusted;  // the messages, adjusted for tool use or harmony
  if (r.tool_use.active() || harmony) adjusted = r.messages;
  if (harmony) harmony_messages(adjusted);
  if (r.tool_use.active()) {
    if (!harmony_calls(m, r, harmony)) {
      if (auto e = prepare_tool_use(m, r, adjusted, constraint)) return e;
    }
    out.tool_format = m.tool_format;
  }
  return render_chat(m, r, r.tool_use.active() || harmony ? adjusted : r.messages, harmony, out);
}

std::optional<api::api_error> prepare_generation(const api::served_model& m, const api::parsed_request& r, prepared_generation& out) {
  const tokenizer& tok = *m.tok;
  api::output_constraint constraint = r.constraint;
  if (r.kind == api::endpoint::completions) {
    if (r.prompt_ids) {
      out.prompt = *r.prompt_ids;
    } else {
      out.prompt_text = r.prompt_text.value_or("");
      out.prompt = encode_prompt(tok, out.prompt_text);
    }
  } else if (auto e = render_chat_prompt(m, r, out, constraint)) {
    return e;
  }
  if (r.thinking_token_budget && !out.reasoning && !out.harmony) {
    return bad("'" + r.thinking_budget_field + "' needs a reasoning parser; this server has none (--reasoning-parser)",
               r.thinking_budget_field);
  }
  out.params = r.params;
  out.n = r.n;
  const bool completions = r.kind == api::endpoint::completions;
  // Completions default to 16 tokens as in OpenAI/vLLM; chat and responses to the rest of the context.
  const generation_check c = check_generation(out.prompt, out.params, completions ? std::optional<int32_t>(16) : std::nullopt,
                                              m.n_vocab, m.max_model_len);
  if (auto e = openai_check_error(c, completions ? (r.more_prompts.empty() ? "prompt" : "prompt[0]") : "messages")) return e;
  if (auto e = prepare_more_prompts(m, r, out)) return e;
  if (!constraint.none()) {
    if (!m.constraints) return bad("structured outputs are not enabled on this server", constraint.param);
    std::optional<api::api_error> err;
    out.params.constraint = m.constraints->compile(constraint, err);
    if (err) return err;
  }
  if (out.harmony) return constrain_harmony(m, r, harmony_calls(m, r, true), out);
  // The grammar waits for the end of the reasoning; the budget ends it.
  if (out.reasoning && *out.reasoning != api::reasoning_start::content && (out.params.constraint || r.thinking_token_budget)) {
    out.params.constraint = api::make_reasoning_constraint(std::move(out.params.constraint), *out.reasoning, m.reasoning_tokens,
                                                           r.thinking_token_budget);
  }
  return std::nullopt;
}

std::optional<api::api_error> cut_after_final_message(const json::array& messages, std::string& prompt_text) {
  const auto& content = messages.back().as_object().at("content").as_string();
  const auto pos = prompt_text.rfind(std::string_view(content.data(), content.size()));
  if (content.empty() || pos == std::string::npos) {
    return bad("continue_final_message: the chat template did not render the final message's content verbatim",
               "continue_final_message");
  }
  prompt_text.resize(pos + content.size());
  return std::nullopt;
}

std::string openai_finish_reason(finish_reason r) {
  switch (r) {
    case finish_reason::stop: return "stop";
    case finish_reason::length: return "length";
    case finish_reason::abort: return "abort";
    case finish_reason::error: return "error";
    default: return "";
  }
}

}  // namespace spate
