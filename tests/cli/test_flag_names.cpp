// cli::flag_names: engine and model errors name configuration fields; the
// command line reports them with the flags that set those fields.
#include <gtest/gtest.h>

#include "cli/cli_options.h"

namespace spate::cli {
namespace {

TEST(FlagNames, MapsEngineAndModelFields) {
  EXPECT_EQ(flag_names("kv_cache_bytes is smaller than one KV block (9 KiB)"), "--kv-cache-memory is smaller than one KV block (9 KiB)");
  EXPECT_EQ(flag_names("max_queued_requests must be >= 1"), "--max-queued-requests must be >= 1");
  EXPECT_EQ(flag_names("block_size must be >= 1"), "--block-size must be >= 1");
  EXPECT_EQ(flag_names("the KV cache (4 blocks of 16 tokens) cannot hold request of 90 tokens (needs 6 blocks); increase kv_cache_bytes"),
            "the KV cache (4 blocks of 16 tokens) cannot hold request of 90 tokens (needs 6 blocks); increase --kv-cache-memory");
}

TEST(FlagNames, WholeWordsOnly) {
  EXPECT_EQ(flag_names("my_block_size and block_sizes stay"), "my_block_size and block_sizes stay");
  EXPECT_EQ(flag_names("max_model_len, max_num_seqs"), "--max-model-len, --max-num-seqs");
  EXPECT_EQ(flag_names("n_threads n_threads"), "--threads --threads");
  EXPECT_EQ(flag_names(""), "");
}

}  // namespace
}  // namespace spate::cli
