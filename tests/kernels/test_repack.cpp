// The byte-level repacking (kernels/repack.cpp, repack_row_fast) against the
// element-wise one that decodes every quant: the same record bytes for every
// type, odd column counts (a padded last group) and several block counts.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/matmul_internal.h"
#include "matmul_test_util.h"

namespace spate::kernels {
namespace {

using test::k_all_types;
using test::random_weight;
using test::tname;

TEST(Repack, ByteLevelPathWritesTheElementwiseBytes) {
  std::mt19937 rng(7);
  for (ggml_type t : k_all_types) {
    if (!detail::is_quantized(t)) continue;
    const int64_t blk = test::block_of(t);
    for (int64_t n_in : {blk, 2 * blk, 3 * std::max<int64_t>(blk, 256)}) {
      for (int64_t n_out : {int64_t{1}, int64_t{8}, int64_t{13}}) {
        const auto w = random_weight(t, n_out, n_in, rng);
        const detail::group_layout L = detail::layout_of(t, n_in);
        const size_t n = size_t(L.stride) * size_t((n_out + 7) / 8);
        std::vector<uint8_t> fast(n, 0), slow(n, 0);
        detail::repack_groups(t, w.data(), n_out, n_in, fast.data());
        detail::repack_groups_elementwise(t, w.data(), n_out, n_in, slow.data());
        EXPECT_EQ(fast, slow) << tname(t) << " n_in=" << n_in << " n_out=" << n_out;
      }
    }
  }
}

}  // namespace
}  // namespace spate::kernels
