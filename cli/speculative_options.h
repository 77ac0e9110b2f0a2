// --speculative-config: vLLM's JSON object for speculative decoding, read once
// into engine/engine_config.h's speculative_config.
//
//   {"method": "ngram", "num_speculative_tokens": k,
//    "prompt_lookup_min": m, "prompt_lookup_max": M}      prompt lookup
//   {"model": "PATH.gguf", "num_speculative_tokens": k}    a draft model
//
// Optional in both: "disable_by_batch_size" (no drafts while more requests
// run; default k_default_disable_by_batch_size, 0 = never off) and
// "adaptive_k" (spate's own, default false: true makes each request ask for
// fewer drafts after rejections, engine/draft_length.h; opt-in until
// perf/bench_speculative.sh --adaptive-k true has measured it).
// As in vLLM, prompt_lookup_min and _max default to each other, and to 5 when
// neither is given. Unknown keys and wrong types are errors.
#pragma once

#include <string>

#include "engine/engine_config.h"

namespace spate::cli {

// disable_by_batch_size when the key is absent: speculate only while one
// request runs. Measured with perf/bench_speculative.sh (SmolLM2 Q4_1, 2
// threads, k 4, ngram 1..3, 2026-11-25, decode tok/s on / off): open-ended
// chat 0.99x at 1 stream but 0.79x at 2 and 0.76x at 3; input-grounded 2.8x
// at 1, 1.8x at 2, 1.2x at 3, 0.98x at 4. Above 1 the chat slowdown exceeds
// the 5% allowed, so 1 is the default; grounded workloads may set 2 or 3.
inline constexpr int32_t k_default_disable_by_batch_size = 1;

// Parses text into out (and the draft model's path into draft_model_path).
// Returns "" or a message naming the flag and the offending key.
std::string parse_speculative_config(const std::string& text, speculative_config& out, std::string& draft_model_path);

}  // namespace spate::cli
