// --speculative-config: vLLM's JSON object for speculative decoding, read once
// into engine/engine_config.h's speculative_config.
//
//   {"method": "ngram", "num_speculative_tokens": k,
//    "prompt_lookup_min": m, "prompt_lookup_max": M}      prompt lookup
//   {"model": "PATH.gguf", "num_speculative_tokens": k}    a draft model
//
// Optional in both: "disable_by_batch_size" (no drafts while more requests
// run; default below, 0 = never off) and "adaptive_k" (spate's own, default
// true: while several requests run, each asks for fewer drafts after
// rejections, engine/draft_length.h; false: k drafts at every decode).
// As in vLLM, prompt_lookup_min and _max default to each other, and to 5 when
// neither is given. Unknown keys and wrong types are errors.
#pragma once

#include <string>

#include "engine/engine_config.h"

namespace spate::cli {

// disable_by_batch_size when the key is absent, per method. Measured with
// perf/scripts/bench_speculative.sh (SmolLM2 Q4_1, 2 threads, k 4, decode tok/s on /
// off, medians of 2-3 reps):
//  - ngram with adaptive_k (2026-11-26): open-ended chat 1.03x at 2 streams,
//    0.99x, 1.02x and 0.97x at 4 in three runs (0.78x in a fourth, before a
//    lone stream kept full k), 1.05x and 1.11x at 16; input-grounded 1.8x at
//    2, 1.2-1.4x at 4, 1.7-2.0x at 16. Without adaptive_k chat fell to 0.73x
//    at 4 and 0.70x at 16. So 16, the largest batch measured without a
//    slowdown over 5%.
//  - draft model (fixed k, 2026-11-25): 0.72-0.80x at 4 and 16 streams, as
//    the draft proposes sequentially; so only a lone request speculates.
inline constexpr int32_t k_default_disable_by_batch_size_ngram = 16;
inline constexpr int32_t k_default_disable_by_batch_size_draft = 1;
inline constexpr bool k_default_adaptive_k = true;

// Parses text into out (and the draft model's path into draft_model_path).
// Returns "" or a message naming the flag and the offending key.
std::string parse_speculative_config(const std::string& text, speculative_config& out, std::string& draft_model_path);

}  // namespace spate::cli
