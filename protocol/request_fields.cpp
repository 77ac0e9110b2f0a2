#include "protocol/request_fields.h"

#include <array>

#include "protocol/request_errors.h"

namespace spate::api {
namespace {

namespace json = boost::json;

enum endpoints : unsigned { cmpl = 1, chat = 2, resp = 4, all = 7 };

// When a refused field's value is harmless: null always is.
enum class off { null_only, is_false, is_true, is_one, empty, text_only };

struct refused_field {
  std::string_view key;
  unsigned where;
  off harmless;
  std::string_view why;  // appended to "'key' is not supported"
};

constexpr std::array<refused_field, 26> k_refused = {{
    {"echo", chat, off::is_false, ": chat responses never repeat the prompt"},
    {"best_of", cmpl | chat, off::is_one, "; use n for several samples (best_of must be null, 1 or equal to n)"},
    {"use_beam_search", cmpl | chat, off::is_false, ": beam search is not implemented"},
    {"length_penalty", cmpl | chat, off::is_one, ": it only applies to beam search"},
    {"include_stop_str_in_output", cmpl | chat, off::is_false, ""},
    {"skip_special_tokens", cmpl | chat, off::is_true, ": special tokens are always skipped in the text"},
    {"spaces_between_special_tokens", cmpl | chat, off::is_true, ""},
    {"truncate_prompt_tokens", cmpl | chat, off::null_only, ": over-long prompts are refused, never truncated"},
    {"prompt_logprobs", cmpl | chat, off::null_only, ""},
    {"allowed_token_ids", cmpl | chat, off::null_only, "; use logit_bias"},
    {"bad_words", cmpl | chat, off::empty, "; use logit_bias"},
    {"logits_processors", cmpl | chat, off::null_only, ""},
    {"return_tokens_as_token_ids", cmpl | chat, off::is_false, ""},
    {"add_special_tokens", chat, off::is_false, ": the chat template adds the special tokens"},
    {"mm_processor_kwargs", cmpl | chat, off::null_only, ": this server accepts text only"},
    {"chat_template", chat, off::null_only, ": the server's template is fixed at start-up (--chat-template)"},
    {"functions", chat, off::empty, "; use tools"},
    {"function_call", chat, off::null_only, "; use tool_choice"},
    {"audio", chat, off::null_only, ": this server accepts and writes text only"},
    {"modalities", chat, off::text_only, ": this server writes text only"},
    {"prediction", chat, off::null_only, ": predicted outputs are not implemented"},
    {"web_search_options", chat, off::null_only, ""},
    {"include", resp, off::empty, ""},
    {"max_tool_calls", resp, off::null_only, ""},
    {"conversation", resp, off::null_only, ": this server does not store conversations; send the whole input"},
    {"top_logprobs", resp, off::null_only, ""},
}};

// Accepted, read by nothing: they describe the caller or storage this
// stateless server does not have.
constexpr std::array<std::pair<std::string_view, unsigned>, 11> k_ignored = {{
    {"user", all},
    {"metadata", all},
    {"store", chat | resp},
    {"service_tier", all},
    {"safety_identifier", all},
    {"prompt_cache_key", all},
    {"request_id", cmpl | chat},
    {"priority", cmpl | chat},
    {"guided_decoding_backend", cmpl | chat},
    {"truncation", resp},
    {"verbosity", chat},
}};

unsigned bit(endpoint e) {
  switch (e) {
    case endpoint::completions: return cmpl;
    case endpoint::chat_completions:
    case endpoint::messages:
    case endpoint::ollama_chat: return chat;  // translated into a chat body (anthropic_request.h, ollama_request.h)
    case endpoint::ollama_generate: return cmpl | chat;
    case endpoint::responses: return resp;
  }
  return 0;
}

bool is_harmless(const json::value& v, off h, int32_t n) {
  if (v.is_null()) return true;
  switch (h) {
    case off::null_only: return false;
    case off::is_false: return v.is_bool() && !v.get_bool();
    case off::is_true: return v.is_bool() && v.get_bool();
    case off::is_one: return v.is_number() && (v.to_number<double>() == 1.0 || v.to_number<double>() == n);
    case off::empty: return (v.is_array() && v.get_array().empty());
    case off::text_only:
      return v.is_array() && v.get_array().size() == 1 && v.get_array()[0].is_string() && v.get_array()[0].get_string() == "text";
  }
  return false;
}

}  // namespace

std::optional<api_error> refuse_unsupported_fields(endpoint kind, const json::object& body, int32_t n) {
  for (const refused_field& f : k_refused) {
    if ((f.where & bit(kind)) == 0) continue;
    const json::value* v = body.if_contains(f.key);
    if (!v || is_harmless(*v, f.harmless, n)) continue;
    return bad(std::string(f.key), "'" + std::string(f.key) + "' is not supported" + std::string(f.why));
  }
  return std::nullopt;
}

bool is_ignored_on_purpose(endpoint kind, std::string_view key) {
  for (const auto& [k, where] : k_ignored) {
    if (k == key && (where & bit(kind)) != 0) return true;
  }
  return false;
}

bool is_listed_field(endpoint kind, std::string_view key) {
  for (const refused_field& f : k_refused) {
    if (f.key == key && (f.where & bit(kind)) != 0) return true;
  }
  return is_ignored_on_purpose(kind, key);
}

}  // namespace spate::api
