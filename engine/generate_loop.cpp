#include "engine/generate_loop.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <spdlog/spdlog.h>
#include <stdexcept>

#include "engine/block_pool.h"
#include "engine/byte_size.h"
#include "engine/kv_cache.h"
#include "engine/model_loader.h"
#include "engine/model_runner.h"
#include "engine/sequence.h"
#include "engine/thread_pool.h"

namespace spate {
namespace {

uint64_t mix_seed(uint64_t base, uint64_t index) {
  uint64_t z = base + 0x9e3779b97f4a7c15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int64_t blocks_for(int64_t positions, int32_t block_size) { return (positions + block_size - 1) / block_size; }

}  // namespace

std::vector<offline_result> run_offline_batch(const loaded_model& m, const generate_config& cfg,
                                              const std::vector<offline_request>& requests) {
  const model_config& c = m.config;
  const size_t per_block = kv_cache::bytes_per_block(c, cfg.block_size, cfg.kv_dtype);
  const auto n_blocks = static_cast<int32_t>(std::min<uint64_t>(cfg.kv_cache_bytes / per_block, 1u << 30));
  spdlog::info("KV cache: {} budget, {} per block of {} tokens ({} per token, {})", format_bytes(cfg.kv_cache_bytes),
               format_bytes(per_block), cfg.block_size, format_bytes(per_block / static_cast<size_t>(cfg.block_size)),
               cfg.kv_dtype == kernels::kv_dtype::f16 ? "f16" : "f32");
  if (n_blocks < 1) throw std::runtime_error("--kv-cache-memory is smaller than one KV block (" + format_bytes(per_block) + ")");
  spdlog::info("# CPU blocks: {}", n_blocks);

  thread_pool pool(cfg.n_threads);
  kv_cache kv(c, n_blocks, cfg.block_size, cfg.kv_dtype);
  block_pool blocks(n_blocks);
  model_runner runner(c, m.weights, kv, pool);

  std::vector<std::unique_ptr<sequence>> seqs;
  seqs.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& r = requests[i];
    seqs.push_back(std::make_unique<sequence>(static_cast<int64_t>(i), r.prompt, r.params, *r.params.max_tokens,
                                              mix_seed(cfg.seed, i), *m.tok, blocks));
  }

  std::deque<size_t> waiting;
  for (size_t i = 0; i < seqs.size(); ++i) waiting.push_back(i);
  std::vector<size_t> running;
  std::vector<float> logits;
  forward_batch batch;
  std::vector<size_t> scheduled;
  int64_t n_preempted = 0, n_steps = 0, n_gen = 0;
  const auto t0 = std::chrono::steady_clock::now();

  while (!waiting.empty() || !running.empty()) {
    // Admit waiting requests while blocks and sequence slots allow.
    while (!waiting.empty() && static_cast<int32_t>(running.size()) < cfg.max_num_seqs) {
      sequence& s = *seqs[waiting.front()];
      if (blocks_for(s.n_tokens(), cfg.block_size) > blocks.n_free()) break;
      s.blocks().grow_to(s.n_tokens(), cfg.block_size);
      running.push_back(waiting.front());
      waiting.pop_front();
    }
    if (running.empty()) {
      throw std::runtime_error("the KV cache (" + std::to_string(n_blocks) + " blocks of " + std::to_string(cfg.block_size) +
                               " tokens) cannot hold request " + std::to_string(seqs[waiting.front()]->id()) +
                               "; increase --kv-cache-memory");
    }
    // Every running sequence needs room for its uncached tokens; preempt the newest when blocks run out.
    for (size_t i = 0; i < running.size();) {
      sequence& s = *seqs[running[i]];
      if (s.blocks().grow_to(s.n_tokens(), cfg.block_size)) {
        ++i;
        continue;
      }
      // Recompute-preemption: the newest running request (possibly s itself) gives back its blocks.
      const size_t victim = running.back();
      running.pop_back();
      seqs[victim]->blocks().clear();
      seqs[victim]->set_n_cached(0);
      waiting.push_front(victim);
      ++n_preempted;
    }
    if (running.empty()) continue;

    // Schedule: decodes first (1 token each), then prefills within the token budget.
    batch.seqs.clear();
    scheduled.clear();
    int64_t budget = cfg.max_num_batched_tokens;
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t idx : running) {
        sequence& s = *seqs[idx];
        const int32_t n_new = s.n_tokens() - s.n_cached();
        const bool is_decode = n_new == 1;
        if (is_decode != (pass == 0)) continue;
        if (n_new > budget && !scheduled.empty()) continue;
        forward_seq fs;
        fs.tokens = std::span<const int32_t>(s.tokens()).subspan(static_cast<size_t>(s.n_cached()));
        fs.n_past = s.n_cached();
        fs.block_table = s.blocks().ids();
        fs.n_logits = 1;
        batch.seqs.push_back(fs);
        scheduled.push_back(idx);
        budget -= n_new;
      }
    }
    logits.resize(scheduled.size() * static_cast<size_t>(c.n_vocab));
    runner.forward(batch, logits.data());
    ++n_steps;

    std::string delta;
    for (size_t k = 0; k < scheduled.size(); ++k) {
      sequence& s = *seqs[scheduled[k]];
      s.set_n_cached(s.n_tokens());
      s.sample_next(std::span<float>(logits.data() + k * static_cast<size_t>(c.n_vocab), static_cast<size_t>(c.n_vocab)), delta);
      ++n_gen;
      if (s.n_tokens() >= cfg.max_model_len && !s.finished()) s.finish_with(finish_reason::length);
    }
    // Finished sequences leave the batch at once and return their blocks.
    std::erase_if(running, [&](size_t idx) {
      if (!seqs[idx]->finished()) return false;
      seqs[idx]->blocks().clear();
      return true;
    });
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("Generated {} tokens for {} requests in {} steps, {:.2f} s ({:.1f} tokens/s), {} preemptions", n_gen,
               seqs.size(), n_steps, secs, secs > 0 ? static_cast<double>(n_gen) / secs : 0.0, n_preempted);

  std::vector<offline_result> out;
  out.reserve(seqs.size());
  for (const auto& sp : seqs) {
    offline_result r;
    r.text = sp->text();
    r.token_ids.assign(sp->generated().begin(), sp->generated().end());
    r.finish_reason = finish_reason_name(sp->finish());
    r.prompt_tokens = sp->n_prompt();
    r.completion_tokens = sp->n_generated();
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace spate
