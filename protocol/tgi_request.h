// TGI's native API (text-generation-inference's POST /generate,
// /generate_stream and POST /): the request body {"inputs": str,
// "parameters": {...}, "stream": bool} read into the shared generation
// request (sampling_params, the structured-output constraint), and TGI's error
// shape {"error": "...", "error_type": "validation" | "overloaded" |
// "generation" | ...} with its status codes (422 for what the input gets
// wrong, as TGI answers).
//
// parameters (TGI's GenerateParameters; null = absent):
//   max_new_tokens (>= 1; default k_tgi_default_max_new_tokens), temperature
//   (> 0), top_k (> 0), top_p and typical_p (in (0, 1)), repetition_penalty
//   (> 0), frequency_penalty ([-2, 2]), stop (at most
//   k_tgi_max_stop_sequences strings), seed, do_sample, return_full_text,
//   details, decoder_input_details, top_n_tokens ([0, k_tgi_max_top_n_tokens]),
//   truncate (keep the last N input tokens), grammar ({"type": "json" |
//   "json_object", "value": schema object or its JSON text} | {"type":
//   "regex", "value": pattern}), watermark, best_of (1 only), adapter_id (a
//   model or LoRA adapter id of this server; default: the default model).
// Decoding is greedy unless do_sample is true or a sampling parameter asks
// for sampling (temperature != 1, top_k, top_p, typical_p), as in TGI.
// decoder_input_details: true is refused (422): this server computes no
// prompt log-probabilities.
//
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine_api.h"
#include "protocol/generation.h"
#include "protocol/openai_request.h"
#include "protocol/output_constraint.h"
#include "protocol/served_model.h"

namespace spate::api {

inline constexpr int32_t k_tgi_max_stop_sequences = 4;  // TGI's --max-stop-sequences default
inline constexpr int32_t k_tgi_max_top_n_tokens = 5;    // TGI's --max-top-n-tokens default
inline constexpr int32_t k_tgi_default_max_new_tokens = 100;

// {"error": message, "error_type": type}, answered with status.
struct tgi_error {
  int status = 422;
  std::string message;
  std::string type = "validation";
};
std::string tgi_error_body(const tgi_error& e);
// The TGI answer to an error of the shared path (model lookup, engine
// refusals): 400 -> 422 validation, 429 -> overloaded, 404 -> not_found,
// 503 -> unhealthy, any other -> its status, "generation".
tgi_error tgi_error_of(const api_error& e);

// Which route the body came to: /generate (never streams), /generate_stream
// (always) or / (streams when "stream" is true).
enum class tgi_route { generate, generate_stream, compat };

struct tgi_request {
  std::string inputs;
  std::string model;                // parameters.adapter_id; "" = the default model
  bool stream = false;
  bool wrap_in_array = false;       // POST / without stream: [response], as TGI answers it
  sampling_params params;           // ranges checked; temperature 0 unless sampling
  bool sampling = false;            // do_sample or a sampling parameter: the seed is reported
  bool details = false;
  bool return_full_text = false;
  int32_t top_n_tokens = 0;
  std::optional<int32_t> truncate;
  output_constraint constraint;     // grammar
  std::vector<std::string> unknown_fields;  // ignored keys of the body and of parameters
};

// Parses and validates the body; on error out is unspecified.
std::optional<tgi_error> parse_tgi_request(std::string_view body, tgi_route route, tgi_request& out);

// Server-wide watermark settings (--watermark-gamma, --watermark-delta).
struct tgi_watermark {
  double gamma = 0.5;
  float delta = 2.0f;
};

// Tokenizes inputs as a completions prompt (BOS as the model asks), keeps
// its last `truncate` tokens, checks lengths against the model (TGI's
// messages), compiles the grammar and sets the watermark's gamma and delta.
// out.prompt_text is the inputs.
std::optional<tgi_error> prepare_tgi_generation(const served_model& m, const tgi_request& r, const tgi_watermark& wm,
                                                prepared_generation& out);

}  // namespace spate::api
