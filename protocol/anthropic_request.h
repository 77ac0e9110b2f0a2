// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens):
// the request body translated into the chat request the rest of the pipeline
// already serves (templates, sampling, stop strings, tool grammars, reasoning),
// and Anthropic's error shape.
//
// Translation (Anthropic's public API reference):
//   system (string or text blocks)  -> a system message
//   messages: text blocks           -> the message's content (joined by "\n")
//             tool_use (assistant)  -> tool_calls {id, function {name, arguments}}
//             tool_result (user)    -> a tool message per block (tool_call_id), before the user's text
//             thinking, redacted_thinking (assistant) -> dropped (history reasoning)
//             image, document, ... -> 400 naming the block type
//   max_tokens (required), stop_sequences -> stop, temperature, top_p, top_k, stream
//   tools {name, description, input_schema} -> function tools; server tools -> 400
//   tool_choice auto | any | tool {name} | none -> auto | required | the function | none;
//     disable_parallel_tool_use -> parallel_tool_calls false
//   thinking {type enabled|disabled, budget_tokens} -> chat_template_kwargs.enable_thinking,
//     thinking_token_budget
//   metadata, anthropic-version: accepted and ignored
// Errors name the client's fields (thinking.budget_tokens, stop_sequences),
// never the chat fields they were translated into.
// A tool_result naming no earlier tool_use id is a 400. Unknown fields are
// listed in unknown_fields (logged), as for OpenAI's routes.
//
// Pure functions; any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "protocol/openai_request.h"

namespace spate::api {

// Parses a Messages body into out (out.kind = endpoint::messages). With
// count_only (count_tokens), max_tokens is not required and stream is refused.
std::optional<api_error> parse_messages_request(std::string_view body, parsed_request& out, bool count_only = false);

// Anthropic's error type for an HTTP status: invalid_request_error (400 and
// other 4xx), authentication_error (401), permission_error (403),
// not_found_error (404), request_too_large (413), rate_limit_error (429),
// api_error (500 and other 5xx), overloaded_error (503, 529).
const char* anthropic_error_type(int status);

// {"type":"error","error":{"type":...,"message":...}}.
std::string anthropic_error_body(int status, std::string_view message);

}  // namespace spate::api
