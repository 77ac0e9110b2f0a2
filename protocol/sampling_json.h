// Reads the OpenAI / vLLM sampling fields of a request object into
// sampling_params, checking JSON types. Used by `spate generate` (JSONL) and
// by the HTTP API (server/openai_request.h). Also the typed-JSON helpers both
// use, so that type errors read the same everywhere:
// "'max_tokens' must be an integer, got string".
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/engine_api.h"

namespace spate {

// Fields understood here: max_tokens, max_completion_tokens, temperature, top_p,
// top_k, min_p, repetition_penalty, presence_penalty, frequency_penalty, seed,
// stop, stop_token_ids, ignore_eos, min_tokens, logit_bias, logprobs,
// top_logprobs, speculative_decoding (a spate extension: false opts the request
// out of speculative decoding). An explicit null means "absent". Returns "" on success or a
// message naming the field and what is wrong with its type (or with a value
// that cannot be represented, e.g. an integer beyond int32); when bad_field is
// given it receives the offending request field ("max_tokens", "stop",
// "top_logprobs", ...). Value ranges are checked separately by validate().
//
// The result does not depend on the order of keys in the object:
//  - max_completion_tokens takes precedence over max_tokens when both are set;
//  - logprobs true  -> top_logprobs entries per token (0 when top_logprobs is absent);
//    logprobs false -> no logprobs; a top_logprobs above 0 is then an error;
//    logprobs <int> -> that many (completions style); top_logprobs must then be absent;
//    logprobs absent -> top_logprobs alone, when given, is the count.
// out is only partially updated when an error is returned.
std::string parse_sampling_json(const boost::json::object& o, sampling_params& out,
                                std::string* bad_field = nullptr);

// True when key is one of the sampling fields above.
bool is_sampling_field(std::string_view key);

// A short description of a JSON value for "got ..." messages: the type name
// ("null", "boolean", "string", "array", "object") or, for numbers, the number
// itself ("1.5", "-3", "1e+23").
std::string describe_json(const boost::json::value& v);

enum class json_int_status { ok, not_integer, out_of_range };

// Reads an integer, also accepting a double with an integral value (2.0), as
// Python clients send them. out_of_range when the value is integral but
// outside [lo, hi]; not_integer for any other type or a fractional/non-finite number.
json_int_status json_get_int(const boost::json::value& v, int64_t lo, int64_t hi, int64_t& out);

// Reads a finite number (integer or double). False for other types and non-finite values.
bool json_get_number(const boost::json::value& v, double& out);

}  // namespace spate
