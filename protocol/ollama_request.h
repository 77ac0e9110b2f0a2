// Ollama's API (POST /api/chat, /api/generate, /api/embed, /api/embeddings):
// the request bodies translated into the requests the rest of the pipeline
// already serves, and Ollama's error shape {"error": "..."}.
//
// /api/chat -> a chat request: messages (role, content, tool_calls with
//   arguments as objects, tool messages), tools, format ("json" -> a JSON
//   object, a JSON Schema -> structured output), think (chat_template_kwargs
//   enable_thinking), stream (default true); spate's extension tool_choice
//   (OpenAI's values) forces a call, as Ollama has no way to;
// /api/generate -> a completion of `prompt` (raw: as is; else rendered by the
//   chat template as one user turn, with `system`), suffix refused;
// options: temperature, top_p, top_k, min_p, num_predict (-> max_tokens; -1 or
//   absent: the rest of the context), stop, seed, repeat_penalty,
//   presence_penalty, frequency_penalty, num_ctx (checked against the
//   model's length by the caller); other options are listed as unknown.
// images and templates are refused with a 400 naming them.
//
// Pure functions; any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/openai_request.h"

namespace spate::api {

struct ollama_extras {
  std::optional<int64_t> num_ctx;  // options.num_ctx, to check against max_model_len
  std::optional<double> keep_alive_s;  // keep_alive (seconds; "5m" style strings parsed), 0: unload after
  bool empty_prompt = false;       // generate with no prompt: load the model only
};

// kind: endpoint::ollama_chat or endpoint::ollama_generate.
std::optional<api_error> parse_ollama_request(endpoint kind, std::string_view body, parsed_request& out, ollama_extras& extras);

// /api/embed {"model", "input": string | [string], "truncate", "options", "keep_alive", "dimensions"}
// and /api/embeddings {"model", "prompt"}: the model and the texts.
std::optional<api_error> parse_ollama_embed(std::string_view body, bool legacy, std::string& model, std::vector<std::string>& texts);

// {"error": message}.
std::string ollama_error_body(std::string_view message);

// keep_alive's upper bound, seconds (about 31 years). A larger value (1e10,
// 1e300, "3000000h") is refused with a 400 naming keep_alive; a negative one
// (any magnitude) keeps the model loaded, as in Ollama.
inline constexpr double k_max_keep_alive_s = 1e9;

// keep_alive as Ollama takes it: seconds as a number, or a duration string
// ("5m", "1h", "30s", "-1" = forever); nullopt when malformed. Not bounded
// here: parse_ollama_request and parse_ollama_embed refuse values above
// k_max_keep_alive_s.
std::optional<double> parse_keep_alive(const boost::json::value& v);

}  // namespace spate::api
