// The prefix cache's disk tier in the engine (engine_impl.h; the store is
// engine/kv_disk_store.h). Writes: after each step, the blocks the step newly
// cached are copied out of the KV cache on the engine thread and queued to
// the store's I/O thread. Reads: a request arriving whose prompt misses
// memory after some block, with the following blocks on disk, waits outside
// the scheduler while the I/O thread reads and verifies them; the engine
// thread then copies them into free blocks, registers them as cached and
// queues the request, which admission finds as an ordinary memory hit. A
// read that fails or comes up short leaves the rest to be recomputed. The
// engine thread never touches a file. A request waiting for its read is not in
// the scheduler's queue yet, so requests arriving after it may be admitted
// before it (it still counts as waiting in the stats and the queue bound).
#include <algorithm>
#include <bit>
#include <spdlog/spdlog.h>

#include "engine/engine_impl.h"

namespace spate {
namespace {

// The store's fingerprint: the weights, the executor's KV format, the block
// size, the file format and the byte order, hashed twice with independent seeds.
prefix_key disk_fingerprint(uint64_t model_id, uint64_t kv_format_id, int32_t block_size, size_t payload_bytes) {
  const uint64_t fields[] = {model_id, kv_format_id, static_cast<uint64_t>(block_size), static_cast<uint64_t>(payload_bytes),
                             k_kv_disk_version, std::endian::native == std::endian::little ? 1u : 2u};
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(fields), sizeof fields);
  return {checksum64(bytes, 0x6b766469736b3031ull), checksum64(bytes, 0x0123456789abcdefull)};
}

}  // namespace

void engine::impl::open_disk_tier() {
  const kv_disk_config& c = cfg_.kv_disk;
  if (c.dir.empty()) return;
  const char* why = nullptr;
  if (!cfg_.enable_prefix_caching) {
    why = "prefix caching is off";
  } else if (exec_.kv_block_bytes() == 0) {
    why = "this executor cannot copy its KV blocks";
  } else if (blocks_.recurrent()) {
    why = "the model has recurrent layers, whose state checkpoints are not written to disk yet";
  } else if (c.model_id == 0) {
    why = "the model file's identity could not be read";
  }
  if (why) {
    spdlog::warn("KV disk cache: {} not used: {}", c.dir, why);
    return;
  }
  kv_disk_store::options o;
  o.dir = c.dir;
  o.block_size = exec_.block_size();
  o.payload_bytes = exec_.kv_block_bytes();
  o.fingerprint = disk_fingerprint(c.model_id, exec_.kv_format_id(), o.block_size, o.payload_bytes);
  o.max_bytes = c.max_bytes;
  o.max_queue_bytes = c.max_queue_bytes;
  auto store = std::make_unique<kv_disk_store>(std::move(o));
  if (store->usable()) disk_ = std::move(store);
}

bool engine::impl::start_disk_read(request_state& r) {
  // An embedding request reuses no prefix; a salted (LoRA) request's keys are
  // per process (the salt is drawn at the adapter's load), so it never finds
  // its blocks after a restart and none are written.
  if (!disk_ || r.ss.hidden || r.ss.cache_salt != 0) return false;
  const std::span<const int32_t> tokens(r.seq.tokens());
  const int32_t bs = blocks_.block_size();
  const auto max_blocks = static_cast<int32_t>((tokens.size() - 1) / static_cast<size_t>(bs));
  const int32_t n_mem = blocks_.probe(tokens) / bs;
  if (n_mem >= max_blocks) return false;
  blocks_.chain_keys(tokens, max_blocks, 0, disk_keys_, disk_parents_);
  int32_t n_disk = disk_->count_present(std::span<const prefix_key>(disk_keys_).subspan(static_cast<size_t>(n_mem)));
  n_disk = std::min(n_disk, blocks_.n_free_blocks());
  // Reads are cut into batches of at most max_queue_bytes of payload (the
  // buffers wait in memory until installed); the next batch is queued when
  // one is installed.
  const auto max_batch = static_cast<int32_t>(
      std::clamp<uint64_t>(cfg_.kv_disk.max_queue_bytes / disk_->payload_bytes(), 1, static_cast<uint64_t>(max_blocks)));
  r.disk_more = n_disk > max_batch;
  n_disk = std::min(n_disk, max_batch);
  if (n_disk == 0) {
    n_disk_misses_ += max_blocks - n_mem;
    return false;
  }
  std::vector<kv_disk_block> want;
  want.reserve(static_cast<size_t>(n_disk));
  for (int32_t b = n_mem; b < n_mem + n_disk; ++b) {
    const auto blk = tokens.subspan(static_cast<size_t>(b) * static_cast<size_t>(bs), static_cast<size_t>(bs));
    want.push_back(kv_disk_block{disk_keys_[static_cast<size_t>(b)], disk_parents_[static_cast<size_t>(b)],
                                 std::vector<int32_t>(blk.begin(), blk.end())});
  }
  r.disk_loading = true;
  r.n_disk_wanted = max_blocks - n_mem;
  ++n_disk_loading_;
  auto blocks = want;
  disk_->read(std::move(want), [this, id = r.seq.id(), blocks = std::move(blocks)](std::vector<std::vector<uint8_t>> payloads) mutable {
    std::lock_guard lk(mu_);
    disk_done_.push_back(disk_read{id, std::move(blocks), std::move(payloads)});
    cv_.notify_one();
  });
  return true;
}

void engine::impl::install_disk_reads() {
  std::vector<disk_read> done;
  {
    std::lock_guard lk(mu_);
    done.swap(disk_done_);
  }
  for (disk_read& d : done) {
    auto it = live_.find(d.id);
    if (it == live_.end()) continue;  // cancelled while reading
    request_state& r = *it->second;
    // The memory hit the read continues becomes most recently used, so the
    // blocks taken below evict other cached blocks first; afterwards the
    // whole chain is, its first block the last to go.
    blocks_.refresh_prefix(r.seq.tokens());
    int32_t n_found = 0;
    std::vector<int32_t> held;
    for (size_t i = 0; i < d.payloads.size(); ++i) {
      const kv_disk_block& b = d.blocks[i];
      if (blocks_.pool().lookup(b.key.lo, b.parent.lo, b.tokens)) {  // cached meanwhile (another request)
        ++n_found;
        continue;
      }
      const auto id = blocks_.insert_cached(b.key, b.parent, b.tokens,
                                            [&](int32_t blk) { exec_.copy_kv_block_in(blk, d.payloads[i]); });
      if (!id) break;  // no block left
      held.push_back(*id);
      ++n_disk_hits_;
      ++n_found;
    }
    for (int32_t id : held) blocks_.pool().release(id);
    blocks_.refresh_prefix(r.seq.tokens());
    r.disk_loading = false;
    --n_disk_loading_;
    // A full batch with more on disk: the next batch (start_disk_read counts
    // the misses if there is none after all).
    const bool more = r.disk_more && n_found == static_cast<int32_t>(d.blocks.size());
    if (!more) n_disk_misses_ += std::max(0, r.n_disk_wanted - n_found);
    if (!more || !start_disk_read(r)) sched_.add(r.ss);
  }
}

void engine::impl::save_committed_blocks() {
  if (!disk_) return;
  for (committed_block& c : blocks_.take_committed()) {
    // The step allocated nothing since the commit, so the block still holds
    // this content; the check guards that assumption.
    if (c.salt != 0 || disk_->has(c.key) || blocks_.pool().lookup(c.key.lo, c.parent.lo, c.tokens) != c.id) continue;
    if (!disk_->accepting_writes()) {  // a full or read-only disk: no copy on the engine thread
      disk_->count_dropped(1);
      continue;
    }
    std::vector<uint8_t> payload(disk_->payload_bytes());
    exec_.copy_kv_block_out(c.id, payload);
    disk_->write(kv_disk_block{c.key, c.parent, std::move(c.tokens)}, std::move(payload));
  }
}

}  // namespace spate
