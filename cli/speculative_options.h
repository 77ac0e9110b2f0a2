// --speculative-config: vLLM's JSON object for speculative decoding, read once
// into engine/engine_config.h's speculative_config.
//
//   {"method": "ngram", "num_speculative_tokens": k,
//    "prompt_lookup_min": m, "prompt_lookup_max": M}      prompt lookup
//   {"model": "PATH.gguf", "num_speculative_tokens": k}    a draft model
//
// Optional in both: "disable_by_batch_size" (no drafts while more requests
// run). As in vLLM, prompt_lookup_min and _max default to each other, and to
// 5 when neither is given. Unknown keys and wrong types are errors.
#pragma once

#include <string>

#include "engine/engine_config.h"

namespace spate::cli {

// Parses text into out (and the draft model's path into draft_model_path).
// Returns "" or a message naming the flag and the offending key.
std::string parse_speculative_config(const std::string& text, speculative_config& out, std::string& draft_model_path);

}  // namespace spate::cli
