#include "protocol/generation.h"

#include <spdlog/spdlog.h>

#include "jinja/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace spate {

namespace {

api::api_error bad(std::string msg, std::string param = "", std::string code = "") {
  api::api_error e;
  e.status = 400;
  e.message = std::move(msg);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

}  // namespace

std::optional<api::api_error> prepare_generation(const api::served_model& m, const api::parsed_request& r, prepared_generation& out) {
  const tokenizer& tok = *m.tok;
  if (r.kind == api::endpoint::completions) {
    if (r.prompt_ids) {
      out.prompt = *r.prompt_ids;
    } else {
      out.prompt_text = r.prompt_text.value_or("");
      out.prompt = tok.encode(out.prompt_text, /*add_special=*/true, /*parse_special=*/true);
    }
  } else {
    if (!m.tmpl) {
      return bad(m.tmpl_error.empty() ? "this model has no chat template; pass --chat-template FILE or use /v1/completions"
                                        : "the chat template could not be parsed: " + m.tmpl_error,
                 "messages", "chat_template_missing");
    }
    chat_template_options o;
    o.add_generation_prompt = r.add_generation_prompt;
    o.extra_context = r.template_extra;
    try {
      out.prompt_text = m.tmpl->render(r.messages, o);
      if (r.continue_final_message) {
        // As vLLM: cut the rendering right after the final assistant message's
        // text, so the model continues it instead of starting a new turn.
        const auto& last = r.messages.back().as_object();
        const auto& content = last.at("content").as_string();
        const auto pos = out.prompt_text.rfind(std::string_view(content.data(), content.size()));
        if (content.empty() || pos == std::string::npos) {
          return bad("continue_final_message: the chat template did not render the final message's content verbatim",
                     "continue_final_message");
        }
        out.prompt_text.resize(pos + content.size());
      }
    } catch (const chat_template_error& e) {
      return bad(std::string("chat template error: ") + e.what(), "messages", "chat_template_error");
    } catch (const std::exception& e) {
      return bad(std::string("chat template error: ") + e.what(), "messages", "chat_template_error");
    }
    out.prompt = tok.encode(out.prompt_text, /*add_special=*/false, /*parse_special=*/true);
  }
  if (out.prompt.empty()) return bad("the prompt is empty", r.kind == api::endpoint::completions ? "prompt" : "messages");
  for (int32_t t : out.prompt) {
    if (t < 0 || t >= m.n_vocab) {
      return bad("prompt token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                     std::to_string(m.n_vocab) + ")",
                 "prompt");
    }
  }
  out.params = r.params;
  out.n = r.n;
  const auto n_prompt = static_cast<int32_t>(out.prompt.size());
  const int32_t room = m.max_model_len - n_prompt;
  if (room < 1) {
    return bad("This model's maximum context length is " + std::to_string(m.max_model_len) + " tokens. However, your prompt has " +
                   std::to_string(n_prompt) + " tokens, which leaves no room for a completion. Please reduce the length of the prompt.",
               r.kind == api::endpoint::completions ? "prompt" : "messages", "context_length_exceeded");
  }
  if (!out.params.max_tokens) out.params.max_tokens = r.kind == api::endpoint::completions ? std::min(16, room) : room;
  if (auto err = validate(out.params, m.n_vocab); !err.empty()) {
    // validate() names the field first: "temperature must be in [0, 2], got -1".
    const std::string param = err.substr(0, err.find(' '));
    return bad(err, param);
  }
  if (*out.params.max_tokens > room) {
    return bad("This model's maximum context length is " + std::to_string(m.max_model_len) + " tokens. However, you requested " +
                   std::to_string(n_prompt + *out.params.max_tokens) + " tokens (" + std::to_string(n_prompt) + " in the prompt, " +
                   std::to_string(*out.params.max_tokens) + " for the completion). Please reduce the length of the prompt or max_tokens.",
               "max_tokens", "context_length_exceeded");
  }
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
