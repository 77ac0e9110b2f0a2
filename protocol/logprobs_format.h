// The OpenAI logprobs objects for completions and chat completions, built from
// the engine's per-token log-probabilities (engine_event::logprobs).
//
//   completions: {"tokens": [..], "token_logprobs": [..], "top_logprobs": [{tok: lp}], "text_offset": [..]}
//   chat:        {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]}
//
// Token strings are the token's text with invalid UTF-8 replaced by U+FFFD;
// "bytes" carries the raw bytes. -inf log-probabilities become -9999.0 (as
// vLLM does), since JSON has no infinity. Thread-safe (const tokenizer).
#pragma once

#include <boost/json.hpp>
#include <vector>

#include "engine/engine_api.h"
#include "tokenizer/tokenizer.h"

namespace spate {

// text_offset: the running character offset of the choice's text; advanced.
boost::json::object completion_logprobs(const tokenizer& tok, const std::vector<token_logprob>& lps, int64_t& text_offset);
boost::json::object chat_logprobs(const tokenizer& tok, const std::vector<token_logprob>& lps);

}  // namespace spate
