// Block pool and KV block manager: refcounts, prefix caching, LRU eviction,
// all-or-nothing allocation. No model needed.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "engine/kv_block_manager.h"

namespace spate {
namespace {

std::vector<int32_t> iota_tokens(int32_t n, int32_t start = 100) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(BlockPool, AllocatesInOrderAndFreesByRefcount) {
  block_pool p(4);
  EXPECT_EQ(p.n_free(), 4);
  EXPECT_EQ(*p.allocate(), 0);
  EXPECT_EQ(*p.allocate(), 1);
  p.retain(1);
  p.release(1);
  EXPECT_EQ(p.ref_count(1), 1);
  EXPECT_EQ(p.n_free(), 2);
  p.release(1);
  p.release(0);
  EXPECT_EQ(p.n_free(), 4);
}

TEST(BlockPool, BlockTableReleasesOnDestruction) {
  block_pool p(8);
  {
    block_table t(p);
    EXPECT_TRUE(t.grow_to(33, 16));
    EXPECT_EQ(t.n_blocks(), 3);
    EXPECT_EQ(p.n_free(), 5);
    block_table moved(std::move(t));
    EXPECT_EQ(t.n_blocks(), 0);
    EXPECT_EQ(moved.n_blocks(), 3);
  }
  EXPECT_EQ(p.n_free(), 8);
}

TEST(BlockPool, ReleaseFrontLeavesHolesAndKeepsTheRestInPlace) {
  block_pool p(8);
  {
    block_table t(p);
    ASSERT_TRUE(t.grow_to(64, 16));
    const std::vector<int32_t> before = t.ids();
    t.release_front(2);
    EXPECT_EQ(t.n_blocks(), 4);  // still covers 64 positions
    EXPECT_EQ(t.n_released(), 2);
    EXPECT_EQ(p.n_free(), 6);
    EXPECT_EQ(t.ids(), (std::vector<int32_t>{k_no_block, k_no_block, before[2], before[3]}));
    t.release_front(1);  // at or below n_released: nothing
    t.release_front(99);  // clamped to the table
    EXPECT_EQ(t.n_released(), 4);
    EXPECT_EQ(p.n_free(), 8);
    ASSERT_TRUE(t.grow_to(80, 16));  // grows at the end as before
    EXPECT_EQ(t.n_blocks(), 5);
    EXPECT_NE(t.ids().back(), k_no_block);
    block_table moved(std::move(t));
    EXPECT_EQ(moved.n_released(), 4);
    EXPECT_EQ(t.n_released(), 0);
  }
  EXPECT_EQ(p.n_free(), 8);  // holes are skipped, the rest released once
}

TEST(KvBlockManager, ReusesTheLongestCachedPrefix) {
  kv_block_manager m(16, 4, true);
  const auto a = iota_tokens(10);
  block_table ta(m.pool());
  prefix_state sa;
  EXPECT_EQ(m.admit(a, 10, ta, sa), 0);
  EXPECT_EQ(ta.n_blocks(), 3);
  m.commit(a, 10, ta, sa);  // blocks 0 and 1 are full
  EXPECT_EQ(m.pool().n_cached(), 2);

  // Same first 8 tokens, then different: two blocks shared.
  auto b = a;
  b[9] = 7;
  block_table tb(m.pool());
  prefix_state sb;
  EXPECT_EQ(m.probe(b), 8);
  EXPECT_EQ(m.admit(b, 10, tb, sb), 8);
  EXPECT_EQ(tb.ids()[0], ta.ids()[0]);
  EXPECT_EQ(tb.ids()[1], ta.ids()[1]);
  EXPECT_NE(tb.ids()[2], ta.ids()[2]);
  EXPECT_EQ(m.pool().ref_count(ta.ids()[0]), 2);
  EXPECT_EQ(m.stats().n_query_tokens, 20);
  EXPECT_EQ(m.stats().n_hit_tokens, 8);

  m.free(ta, sa);
  m.free(tb, sb);
  EXPECT_EQ(m.n_free_blocks(), 16);
}

TEST(KvBlockManager, AlwaysLeavesTheLastTokenToCompute) {
  kv_block_manager m(16, 4, true);
  const auto a = iota_tokens(8);  // exactly two blocks
  block_table ta(m.pool());
  prefix_state sa;
  ASSERT_EQ(m.admit(a, 8, ta, sa), 0);
  m.commit(a, 8, ta, sa);
  m.free(ta, sa);
  block_table tb(m.pool());
  prefix_state sb;
  EXPECT_EQ(m.admit(a, 8, tb, sb), 4);  // the block holding token 7 is recomputed
  EXPECT_EQ(tb.n_blocks(), 2);
  m.free(tb, sb);
  EXPECT_EQ(m.n_free_blocks(), 16);
}

TEST(KvBlockManager, PrefixIsKeyedByItsWholeHistory) {
  kv_block_manager m(16, 4, true);
  auto a = iota_tokens(9);
  block_table ta(m.pool());
  prefix_state sa;
  m.admit(a, 9, ta, sa);
  m.commit(a, 9, ta, sa);
  // Same second block, different first block: no hit at all.
  auto b = a;
  b[0] = 1;
  EXPECT_EQ(m.probe(b), 0);
  m.free(ta, sa);
}

TEST(KvBlockManager, FreedCachedBlocksAreEvictedLruOnlyWhenNeeded) {
  kv_block_manager m(4, 4, true);
  const auto a = iota_tokens(9, 0);
  const auto b = iota_tokens(9, 1000);
  {
    block_table t(m.pool());
    prefix_state s;
    m.admit(a, 9, t, s);
    m.commit(a, 9, t, s);
    m.free(t, s);
  }
  EXPECT_EQ(m.n_free_blocks(), 4);
  EXPECT_EQ(m.pool().n_evictable(), 2);
  EXPECT_EQ(m.probe(a), 8);
  {
    // b needs 3 blocks: 2 plain free ones, then the least recently released cached one.
    block_table t(m.pool());
    prefix_state s;
    ASSERT_EQ(m.admit(b, 9, t, s), 0);
    EXPECT_EQ(m.pool().n_evictable(), 1);
    // Released last block first, so a's second block was evicted and its first survives.
    EXPECT_EQ(m.probe(a), 4);
    m.free(t, s);
  }
  EXPECT_EQ(m.n_free_blocks(), 4);
}

TEST(KvBlockManager, AdmissionIsAllOrNothing) {
  kv_block_manager m(3, 4, true);
  const auto a = iota_tokens(9);
  block_table hold(m.pool());
  ASSERT_TRUE(m.grow(hold, 4));  // one block taken elsewhere
  block_table t(m.pool());
  prefix_state s;
  EXPECT_EQ(m.admit(a, 9, t, s), -1);  // needs 3, 2 available
  EXPECT_EQ(t.n_blocks(), 0);
  EXPECT_EQ(m.n_free_blocks(), 2);
  EXPECT_EQ(m.stats().n_query_tokens, 0);
  EXPECT_FALSE(m.grow(hold, 16));  // needs 3 more
  EXPECT_EQ(hold.n_blocks(), 1);
  EXPECT_TRUE(m.grow(hold, 12));
  EXPECT_EQ(m.n_free_blocks(), 0);
}

TEST(KvBlockManager, RevivingEvictableBlocksCountsAgainstFreeSpace) {
  kv_block_manager m(3, 4, true);
  const auto a = iota_tokens(9);
  {
    block_table t(m.pool());
    prefix_state s;
    m.admit(a, 9, t, s);
    m.commit(a, 9, t, s);
    m.free(t, s);
  }
  block_table hold(m.pool());
  ASSERT_TRUE(m.grow(hold, 4));  // takes the plain free block
  // a would reuse its 2 evictable blocks and need 1 more, which does not exist.
  block_table t(m.pool());
  prefix_state s;
  EXPECT_EQ(m.admit(a, 9, t, s), -1);
  hold.clear();
  EXPECT_EQ(m.admit(a, 9, t, s), 8);
  m.free(t, s);
  EXPECT_EQ(m.n_free_blocks(), 3);
}

TEST(KvBlockManager, DuplicateContentStaysPrivateAndIsFreed) {
  kv_block_manager m(8, 4, true);
  const auto a = iota_tokens(9);
  block_table t1(m.pool()), t2(m.pool());
  prefix_state s1, s2;
  ASSERT_EQ(m.admit(a, 9, t1, s1), 0);
  ASSERT_EQ(m.admit(a, 9, t2, s2), 0);  // nothing committed yet: computed twice
  m.commit(a, 9, t1, s1);
  m.commit(a, 9, t2, s2);
  EXPECT_EQ(m.pool().n_cached(), 2);
  m.free(t1, s1);
  m.free(t2, s2);
  EXPECT_EQ(m.n_free_blocks(), 8);
  EXPECT_EQ(m.pool().n_evictable(), 2);
}

TEST(KvBlockManager, DisabledCachingNeverHits) {
  kv_block_manager m(8, 4, false);
  const auto a = iota_tokens(9);
  block_table t(m.pool());
  prefix_state s;
  m.admit(a, 9, t, s);
  m.commit(a, 9, t, s);
  m.free(t, s);
  EXPECT_EQ(m.probe(a), 0);
  EXPECT_EQ(m.pool().n_evictable(), 0);
  EXPECT_EQ(m.stats().n_query_tokens, 0);
}

TEST(KvBlockManager, IncrementalCommitChainsKeys) {
  kv_block_manager m(8, 4, true);
  std::vector<int32_t> toks = iota_tokens(5);
  block_table t(m.pool());
  prefix_state s;
  m.admit(toks, 5, t, s);
  m.commit(toks, 5, t, s);
  // Decode 4 more tokens one by one.
  for (int i = 0; i < 4; ++i) {
    toks.push_back(500 + i);
    ASSERT_TRUE(m.grow(t, static_cast<int64_t>(toks.size())));
    m.commit(toks, static_cast<int32_t>(toks.size()), t, s);
  }
  EXPECT_EQ(s.n_committed_blocks, 2);
  auto probe = toks;
  probe.push_back(1);
  EXPECT_EQ(m.probe(probe), 8);
  m.free(t, s);
}

}  // namespace
}  // namespace spate

namespace spate {
namespace {

TEST(KvBlockManagerDiskTier, CommitRecordsNewBlocksWithTheirChainKeys) {
  kv_block_manager m(8, 4, true);
  m.set_track_committed(true);
  const auto toks = iota_tokens(10);
  block_table t(m.pool());
  prefix_state st;
  ASSERT_EQ(m.admit(toks, 10, t, st), 0);
  m.commit(toks, 10, t, st);
  const std::vector<committed_block> c = m.take_committed();
  ASSERT_EQ(c.size(), 2u);  // two full blocks of 4
  std::vector<prefix_key> keys, parents;
  m.chain_keys(toks, 2, 0, keys, parents);
  EXPECT_EQ(c[0].key, keys[0]);
  EXPECT_EQ(c[1].key, keys[1]);
  EXPECT_EQ(c[1].parent, keys[0]);
  EXPECT_EQ(c[0].parent, root_prefix_key(0));
  EXPECT_EQ(c[1].tokens, std::vector<int32_t>(toks.begin() + 4, toks.begin() + 8));
  EXPECT_EQ(c[0].id, t.ids()[0]);
  EXPECT_TRUE(m.take_committed().empty());
  // Salted chains differ from the base's in both halves.
  std::vector<prefix_key> salted, sp;
  m.chain_keys(toks, 2, 9, salted, sp);
  EXPECT_NE(salted[0].lo, keys[0].lo);
  EXPECT_NE(salted[0].hi, keys[0].hi);
}

TEST(KvBlockManagerDiskTier, InsertedBlocksAreFoundByAdmission) {
  kv_block_manager m(8, 4, true);
  const auto toks = iota_tokens(13);
  std::vector<prefix_key> keys, parents;
  m.chain_keys(toks, 3, 0, keys, parents);
  std::vector<int32_t> filled, held;
  for (int32_t b = 0; b < 3; ++b) {
    const std::span<const int32_t> blk(toks.data() + 4 * b, 4);
    const auto id = m.insert_cached(keys[static_cast<size_t>(b)], parents[static_cast<size_t>(b)], blk,
                                    [&](int32_t i) { filled.push_back(i); });
    ASSERT_TRUE(id);
    held.push_back(*id);
  }
  // Already cached: not inserted again, fill not called.
  EXPECT_FALSE(m.insert_cached(keys[0], parents[0], std::span<const int32_t>(toks.data(), 4), [&](int32_t) { FAIL(); }));
  for (int32_t id : held) m.pool().release(id);
  m.refresh_prefix(toks);
  EXPECT_EQ(filled.size(), 3u);
  EXPECT_EQ(m.probe(toks), 12);
  block_table t(m.pool());
  prefix_state st;
  EXPECT_EQ(m.admit(toks, 13, t, st), 12);
  EXPECT_EQ(std::vector<int32_t>(t.ids().begin(), t.ids().begin() + 3), filled);
}

TEST(KvBlockManagerDiskTier, RefreshedPrefixIsEvictedLastAndItsFirstBlockLast) {
  kv_block_manager m(4, 4, true);
  const auto a = iota_tokens(9, 100), b = iota_tokens(5, 500);
  for (const auto* toks : {&a, &b}) {  // a: 2 cached blocks, then b: 1
    block_table t(m.pool());
    prefix_state st;
    m.admit(*toks, static_cast<int32_t>(toks->size()), t, st);
    m.commit(*toks, static_cast<int32_t>(toks->size()), t, st);
  }
  m.refresh_prefix(a);  // a's blocks become the most recent, its first the last to go
  block_table t(m.pool());
  ASSERT_TRUE(t.grow_to(8, 4));  // takes the free block, then evicts b's
  EXPECT_EQ(m.probe(a), 8);
  EXPECT_EQ(m.probe(b), 0);
  ASSERT_TRUE(t.grow_to(12, 4));  // evicts a's second block first
  EXPECT_EQ(m.probe(a), 4);
}

}  // namespace
}  // namespace spate

namespace spate {
namespace {

// Recurrent models: a working state slot per admitted sequence, checkpoints
// at block boundaries, reuse only up to a checkpoint.
TEST(KvBlockManagerState, AdmissionTakesAWorkingSlotAllOrNothing) {
  kv_block_manager m(16, 4, true, /*n_state_slots=*/1);
  ASSERT_TRUE(m.recurrent());
  const auto a = iota_tokens(6);
  block_table ta(m.pool()), sa(*m.state_pool());
  prefix_state pa;
  EXPECT_EQ(m.admit(a, 6, ta, pa, true, 0, &sa), 0);
  ASSERT_EQ(sa.n_blocks(), 1);
  auto ops = m.take_state_ops();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].src, state_op::k_zero_state);
  EXPECT_EQ(ops[0].dst, sa.ids()[0]);
  // No slot left: a second sequence gets neither blocks nor a slot.
  block_table tb(m.pool()), sb(*m.state_pool());
  prefix_state pb;
  EXPECT_EQ(m.admit(iota_tokens(6, 500), 6, tb, pb, true, 0, &sb), -1);
  EXPECT_EQ(tb.n_blocks(), 0);
  EXPECT_EQ(sb.n_blocks(), 0);
  EXPECT_EQ(m.n_free_blocks(), 14);
  m.free(ta, pa, &sa);
  EXPECT_EQ(m.n_free_state_slots(), 1);
  EXPECT_THROW(m.admit(a, 6, tb, pb), std::invalid_argument);  // a recurrent sequence without a slot
}

TEST(KvBlockManagerState, ReuseStopsAtTheLastCheckpoint) {
  kv_block_manager m(32, 4, true, /*n_state_slots=*/4, /*checkpoint_interval_blocks=*/2);
  const auto a = iota_tokens(20);
  block_table ta(m.pool()), sa(*m.state_pool());
  prefix_state pa;
  ASSERT_EQ(m.admit(a, 4, ta, pa, true, 0, &sa), 0);
  m.take_state_ops();
  // Steps ending at 4 (1 block: under the interval), 8 (2 blocks: a checkpoint), 12 (no), 16 (a checkpoint).
  for (int32_t n : {4, 8, 12, 16}) {
    ASSERT_TRUE(m.grow(ta, n));
    m.commit(a, n, ta, pa, 0, &sa);
  }
  const auto ops = m.take_state_ops();
  ASSERT_EQ(ops.size(), 2u);
  for (const state_op& op : ops) {
    EXPECT_EQ(op.src, sa.ids()[0]);
    EXPECT_EQ(op.release, op.dst);
    m.release_state(op.release);
  }
  EXPECT_EQ(m.n_checkpoints(), 2);
  EXPECT_EQ(m.pool().n_cached(), 4);
  // 4 KV blocks are cached, but a recurrent sequence reuses up to the checkpoint at 16.
  auto b = a;
  b[18] = 999;
  EXPECT_EQ(m.probe(b), 16);
  // Up to the one at 8 when block 3 differs (its KV and the checkpoint at 16 do not apply).
  auto c = a;
  c[13] = 999;
  EXPECT_EQ(m.probe(c), 8);
  block_table tc(m.pool()), sc(*m.state_pool());
  prefix_state pc;
  EXPECT_EQ(m.admit(c, 20, tc, pc, true, 0, &sc), 8);
  const auto restore = m.take_state_ops();
  ASSERT_EQ(restore.size(), 1u);
  EXPECT_EQ(restore[0].dst, sc.ids()[0]);
  EXPECT_EQ(restore[0].release, restore[0].src);  // the checkpoint is held until the copy ran
  EXPECT_EQ(m.state_pool()->ref_count(restore[0].src), 1);
  m.release_state(restore[0].release);
  // A prefix with KV but no checkpoint at all is not reused.
  auto d = a;
  d[5] = 999;
  EXPECT_EQ(m.probe(d), 0);
  m.free(ta, pa, &sa);
  m.free(tc, pc, &sc);
  EXPECT_EQ(m.n_free_state_slots(), 4);  // the checkpoints stay, evictable
  EXPECT_EQ(m.n_checkpoints(), 2);
}

}  // namespace
}  // namespace spate
