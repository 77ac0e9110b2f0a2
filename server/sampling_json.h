// Reads the OpenAI / vLLM sampling fields of a request object into
// sampling_params, checking JSON types. Used by `spate generate` (JSONL) and
// by the HTTP API.
#pragma once

#include <boost/json.hpp>
#include <string>
#include <vector>

#include "engine/sampling_params.h"

namespace spate {

// Fields understood here: max_tokens, max_completion_tokens, temperature, top_p,
// top_k, min_p, repetition_penalty, presence_penalty, frequency_penalty, seed,
// stop, stop_token_ids, ignore_eos, min_tokens, logit_bias, logprobs,
// top_logprobs. Returns "" on success or a message naming the field and what is
// wrong with its type. Value ranges are checked separately by validate().
std::string parse_sampling_json(const boost::json::object& o, sampling_params& out);

// True when key is one of the sampling fields above.
bool is_sampling_field(std::string_view key);

}  // namespace spate
