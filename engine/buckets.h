// Step-shape buckets (as vLLM on Gaudi): prompt buckets (batch size, sequence
// length) and decode buckets (batch size, KV blocks of the whole batch). Each
// dimension is generated from (min, step, max): powers of two from min up to
// step, then multiples of step up to max. A step is padded to the smallest
// bucket that holds it; on the CPU the padded rows are never computed, so
// padding only shows up as accounted waste.
//
// Pure functions and plain data; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace spate {

struct bucket_range {
  int32_t min = 1;
  int32_t step = 1;
  int32_t max = 1;
};

// Defaults sized for a small CPU host (2 cores): 15 prompt buckets (up to
// 2 x 256 tokens) and 72 decode buckets (up to 16 sequences over 256 blocks);
// warmup takes a few seconds with the default model. Larger steps run
// unpadded (logged once).
struct bucket_config {
  bucket_range prompt_bs{1, 2, 2};
  bucket_range prompt_seq{32, 64, 256};
  bucket_range decode_bs{1, 4, 16};
  bucket_range decode_block{4, 32, 256};
};

struct bucket {
  int32_t bs = 0;
  int32_t len = 0;  // prompt: sequence length (tokens); decode: KV blocks of the batch
  bool operator==(const bucket&) const = default;
};

// The values of one dimension, ascending, without duplicates:
// min, 2*min, 4*min, ... while below step, then step, 2*step, ... up to max
// (max itself included). Precondition: 1 <= min, 1 <= step, min <= max.
std::vector<int32_t> bucket_values(const bucket_range& r);

// Cartesian product of the two dimensions, ordered by (bs, len).
std::vector<bucket> make_buckets(const bucket_range& bs, const bucket_range& len);

// The smallest bucket (fewest padded elements bs * len, then smallest bs)
// with bs >= n_seqs and len >= len; nullopt when none holds it.
std::optional<bucket> find_bucket(const std::vector<bucket>& buckets, int32_t n_seqs, int32_t len);

// "" or a message naming the invalid range.
std::string validate(const bucket_range& r, const char* name);

// "bs:[1, 32, 64], seq:[128, 128, 1024]"-style description used in logs.
std::string describe(const bucket_range& bs, const bucket_range& len, const char* len_name);
// "[(1, 128), (1, 256), ...]"
std::string describe(const std::vector<bucket>& buckets);

// The order warmup runs buckets in, as indices: 0..n_prompt-1 are the prompt
// buckets, n_prompt.. the decode buckets (each list as make_buckets orders
// it). First the smallest of each kind (what a first short request runs, and
// what warmup predicts the others' cost from), then the rest in list order;
// each index once.
std::vector<int32_t> warmup_order(int32_t n_prompt, int32_t n_decode);

}  // namespace spate
