// OpenAI-compatible request bodies: parsing and validation into plain structs.
//
// Pure functions, no I/O and no shared state: safe to call from any thread.
// The HTTP layer calls parse_request() with the raw body of
// POST /v1/completions, /v1/chat/completions or /v1/responses, answers an
// error with status api_error::status and body error_body(), and otherwise
// calls validate_for_model() once it knows the model's vocabulary.
//
// Accepted bodies: valid UTF-8, one JSON object, nesting at most
// k_max_json_depth levels deep. Unknown keys are never an error; they are
// listed in parsed_request::unknown_fields. Features that would silently
// change the meaning of a request if ignored (images, previous_response_id,
// best_of, ...) are rejected with a "not supported" message.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine_api.h"
#include "protocol/output_constraint.h"

namespace spate::api {

// Nesting limit for request bodies (objects + arrays). Deep enough for tool
// JSON schemas, shallow enough that no recursive consumer can overflow a stack.
inline constexpr size_t k_max_json_depth = 64;

// Upper bound on parsed_request::n (choices per request).
inline constexpr int32_t k_max_n = 16;
// Completions with a list of prompts: at most this many prompts, and at most
// k_max_choices choices (prompts x n) in one request.
inline constexpr int32_t k_max_prompts = 128;
inline constexpr int32_t k_max_choices = 256;

// Upper bound on completions' integer `logprobs` (OpenAI's limit); chat's
// top_logprobs goes up to max_top_logprobs (20).
inline constexpr int32_t k_max_completion_logprobs = 5;

// messages: Anthropic's Messages API (anthropic_request.h), served as a chat;
// ollama_chat, ollama_generate: Ollama's /api/chat and /api/generate
// (ollama_request.h), served as a chat or a completion.
enum class endpoint { completions, chat_completions, responses, messages, ollama_chat, ollama_generate };

// OpenAI error object {"error":{"message","type","param","code"}}.
struct api_error {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null
};

// The serialized OpenAI error shape, e.g.
// {"error":{"message":"...","type":"invalid_request_error","param":"max_tokens","code":null}}.
std::string error_body(const api_error& e);

// Tool use as the request asks for it (chat: tools, tool_choice,
// parallel_tool_calls; responses: function tools, converted to the chat shape).
struct tool_request {
  enum class choice { none, automatic, required, named };
  boost::json::array tools;  // [{"type":"function","function":{"name","description"?,"parameters"?}}], validated
  choice mode = choice::none;
  std::string name;          // named: the function that must be called (one of tools)
  bool parallel = true;      // parallel_tool_calls
  bool active() const { return mode != choice::none && !tools.empty(); }
};

struct parsed_request {
  endpoint kind = endpoint::completions;
  std::string model;  // "" when absent or null

  // completions: exactly one of these is set (non-empty). prompt_ids are >= 0;
  // their upper bound is checked by validate_for_model().
  std::optional<std::string> prompt_text;
  std::optional<std::vector<int32_t>> prompt_ids;
  // completions with a list of prompts (strings or token-id lists, as OpenAI
  // and vLLM take them): the first is in prompt_text / prompt_ids, the others
  // here, in order; each has exactly one of text / ids set (non-empty).
  struct prompt_item {
    std::optional<std::string> text;
    std::optional<std::vector<int32_t>> ids;
  };
  std::vector<prompt_item> more_prompts;

  // chat_completions / responses: validated messages, in the shape a chat
  // template expects: objects with "role" (system, user, assistant or tool;
  // "developer" is mapped to "system") and "content" (always a string: text
  // parts are joined with "\n"; null content of an assistant message with
  // tool_calls becomes ""). Other fields (name, tool_calls, tool_call_id, ...)
  // are kept; a tool call's function.arguments given as a string holding a JSON
  // object is replaced by that object, as templates index into it.
  boost::json::array messages;
  // Extra template variables: "tools" (chat, unless tool_choice is "none"),
  // "documents", and the contents of "chat_template_kwargs" (which may not
  // redefine messages or add_generation_prompt; bounded as request_errors.h
  // says; enable_thinking, when given, is a boolean).
  boost::json::object template_extra;
  // chat / responses: the tools and how they may be used.
  tool_request tool_use;
  // chat: vLLM's add_generation_prompt (default true; false when
  // continue_final_message is set). responses: always true.
  bool add_generation_prompt = true;
  // chat (vLLM extension): render the final assistant message open-ended so the
  // model continues it (no end-of-turn after it, no generation prompt).
  bool continue_final_message = false;

  // Via parse_sampling_json; responses: max_output_tokens -> max_tokens,
  // temperature, top_p only. max_tokens stays empty when the request has none:
  // the server picks the default (OpenAI: 16 for completions; chat and
  // responses: the rest of the context).
  sampling_params params;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage (stream_options only with stream)
  int32_t n = 1;               // [1, k_max_n]
  bool echo = false;           // completions: prepend the prompt to the text
  // completions: the integer `logprobs`, [0, 5]; chat: top_logprobs ([0, 20])
  // when logprobs is true. Equal to params.logprobs.
  std::optional<int32_t> logprobs;
  bool chat_logprobs = false;  // chat: logprobs:true
  // Structured output (output_constraint.h); compiled by prepare_generation.
  output_constraint constraint;
  // Set for Ollama's routes (ollama_chat, ollama_generate): the answer is
  // Ollama's (kind stays the served shape: chat or completions).
  std::optional<endpoint> ollama_kind;
  int64_t load_duration_ns = 0;  // Ollama's load_duration: what the request waited for its model (set by the server)
  // chat (vLLM's): return the reasoning (reasoning_content) when the server
  // has a reasoning parser; false drops it from the response.
  bool include_reasoning = true;
  // chat (vLLM's thinking_token_budget): at most this many tokens of
  // reasoning, then "</think>" is forced; needs a think-tag reasoning parser.
  std::optional<int32_t> thinking_token_budget;
  // The client's name of that field, for errors: Anthropic's is thinking.budget_tokens.
  std::string thinking_budget_field = "thinking_token_budget";
  // chat's reasoning_effort, the Responses API's reasoning.effort: "low",
  // "medium" or "high", also set as the template variable reasoning_effort
  // (gpt-oss's template writes it into its system message; templates that do
  // not read it ignore it, as in vLLM).
  std::optional<std::string> reasoning_effort;
  // Top-level keys that were ignored, in body order (the server logs them at debug).
  std::vector<std::string> unknown_fields;
};

// Parses and validates the body for the endpoint into out (reset first). On
// error returns an api_error (status 400) whose message says exactly what is
// wrong and whose param names the field (e.g. "messages[1].role",
// "max_tokens"); out is then unspecified. Sampling value ranges that do not
// depend on the model are checked here too.
std::optional<api_error> parse_request(endpoint kind, std::string_view body, parsed_request& out);

// Range checks that need the model: sampling validate() with n_vocab
// (stop_token_ids, logit_bias) and prompt_ids in [0, n_vocab). Precondition:
// r came from a successful parse_request().
std::optional<api_error> validate_for_model(const parsed_request& r, int32_t n_vocab);

// POST /tokenize and /detokenize bodies, as in vLLM:
//   tokenize:   {"model"?, "prompt": str, "add_special_tokens"?: bool (default true)}
//            or {"model"?, "messages": [...], "add_generation_prompt"?: bool (default true),
//                "add_special_tokens"?: bool (default false, as vLLM: the template adds them),
//                "tools"?, "chat_template_kwargs"?, "continue_final_message"?}
//   detokenize: {"model"?, "tokens": [int...]}
struct tokenize_request {
  std::string model;
  std::optional<std::string> prompt;  // set for the prompt form
  boost::json::array messages;        // the messages form: validated as for chat
  boost::json::object template_extra; // messages form: as parsed_request::template_extra
  tool_request tool_use;              // messages form: tools, tool_choice, parallel_tool_calls as for chat
  bool add_special_tokens = true;
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  std::vector<std::string> unknown_fields;
};
struct detokenize_request {
  std::string model;
  std::vector<int32_t> tokens;  // >= 0; upper bound via validate_tokens_for_model()
  std::vector<std::string> unknown_fields;
};
std::optional<api_error> parse_tokenize(std::string_view body, tokenize_request& out);
std::optional<api_error> parse_detokenize(std::string_view body, detokenize_request& out);

// Checks ids in [0, n_vocab); the error's param is "<param>[i]" for the first bad one.
std::optional<api_error> validate_token_ids(std::span<const int32_t> ids, int32_t n_vocab, std::string_view param);

}  // namespace spate::api
