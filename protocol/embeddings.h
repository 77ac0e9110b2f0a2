// The OpenAI embeddings API (POST /v1/embeddings): request parsing and the
// response body. Plain functions; any thread.
//
//   request:  {"input": string | [string...] | [int...] | [[int...]...],
//              "model"?, "encoding_format"?: "float" | "base64",
//              "dimensions"?: int (only the model's width; no truncation),
//              "user"?: string (accepted, ignored)}
//   response: {"object": "list", "model": ..., "data": [{"object": "embedding",
//              "index": i, "embedding": [float...] | "<base64>"}...],
//              "usage": {"prompt_tokens": n, "total_tokens": n}}
// base64 is the little-endian float32 bytes of the vector, as OpenAI sends it.
// Bounds: at most k_max_embedding_inputs inputs; no empty input.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/openai_request.h"

namespace spate::api {

inline constexpr size_t k_max_embedding_inputs = 2048;  // OpenAI's limit per request

struct embeddings_request {
  std::string model;
  // Exactly one of the two is filled: text inputs (tokenized by the caller) or token-id inputs.
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> token_inputs;
  bool base64 = false;
  std::optional<int32_t> dimensions;
  std::vector<std::string> unknown_fields;
  size_t n_inputs() const { return texts.empty() ? token_inputs.size() : texts.size(); }
};

// 400 naming the field for malformed JSON, wrong types, an empty input, too many inputs.
std::optional<api_error> parse_embeddings(std::string_view body, embeddings_request& out);

// The response body; vectors[i] answers input i.
std::string format_embeddings(const std::vector<std::vector<float>>& vectors, bool base64, const std::string& model,
                              int64_t prompt_tokens);

// RFC 4648 base64 (with padding) of bytes.
std::string base64_encode(std::string_view bytes);

}  // namespace spate::api
