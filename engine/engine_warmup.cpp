// Bucket logging and warmup: one dummy forward per prompt and decode bucket
// before serving, so the executor's workspaces are sized once and first
// requests do not pay for it.
#include <algorithm>
#include <cmath>
#include <spdlog/spdlog.h>

#include "engine/engine_impl.h"
#include "model/model_loader.h"
#include "util/byte_size.h"
#include "util/progress.h"

namespace spate {


void engine::impl::log_buckets() const {
  spdlog::info("Prompt bucket config (min, step, max_warmup) {}", describe(cfg_.buckets.prompt_bs, cfg_.buckets.prompt_seq, "seq"));
  spdlog::info("Generated {} prompt buckets: {}", prompt_buckets_.size(), describe(prompt_buckets_));
  spdlog::info("Decode bucket config (min, step, max_warmup) {}", describe(cfg_.buckets.decode_bs, cfg_.buckets.decode_block, "block"));
  spdlog::info("Generated {} decode buckets: {}", decode_buckets_.size(), describe(decode_buckets_));
}

void engine::impl::warmup() {
  const auto t0 = clock_type::now();
  // Workspaces for the largest bucket of either kind, so steady state allocates nothing.
  int64_t max_tokens = 1, max_rows = 1;
  for (const bucket& pb : prompt_buckets_) {
    max_tokens = std::max<int64_t>(max_tokens, static_cast<int64_t>(pb.bs) * pb.len);
    max_rows = std::max<int64_t>(max_rows, pb.bs);
  }
  for (const bucket& db : decode_buckets_) {
    max_tokens = std::max<int64_t>(max_tokens, db.bs);
    max_rows = std::max<int64_t>(max_rows, db.bs);
  }
  exec_.reserve(max_tokens, max_rows, cfg_.sched.max_model_len);

  std::vector<float> logits;
  const auto n_prompt = static_cast<int32_t>(prompt_buckets_.size());
  const auto n_total = static_cast<int32_t>(prompt_buckets_.size() + decode_buckets_.size());
  percent_steps steps(n_total);
  int32_t n_done = 0, n_prompt_run = 0;
  auto progress = [&] {
    const auto pct = steps.advance(++n_done);
    if (!pct) return;
    spdlog::info("Warmup: {}% ({}/{} buckets)", *pct, n_done, n_total);
    if (cfg_.on_warmup_progress) cfg_.on_warmup_progress(*pct, n_done, n_total);
  };
  const int32_t block_size = exec_.block_size();
  // Runs bucket i (i < n_prompt: prompt bucket i, else decode bucket i - n_prompt); its seconds.
  auto run_bucket = [&](int32_t i) {
    const auto t_start = clock_type::now();
    if (i < n_prompt) {
      const bucket& pb = prompt_buckets_[static_cast<size_t>(i)];
      spdlog::info("[Warmup][Prompt][{}/{}] batch_size:{} seq_len:{}", i + 1, n_prompt, pb.bs, pb.len);
      run_warmup_step(pb.bs, 0, pb.len, logits);
      ++n_prompt_run;
    } else {
      const bucket& db = decode_buckets_[static_cast<size_t>(i - n_prompt)];  // len: KV blocks of the whole batch
      spdlog::info("[Warmup][Decode][{}/{}] batch_size:{} num_blocks:{}", i - n_prompt + 1, n_total - n_prompt, db.bs,
                   db.len);
      const int32_t blocks_per_seq = std::max(1, db.len / db.bs);
      run_warmup_step(db.bs, blocks_per_seq * block_size - 1, 1, logits);
    }
    progress();
    return std::chrono::duration<double>(clock_type::now() - t_start).count();
  };
  // A bucket's cost, predicted from the smallest bucket of its kind (run
  // first): prompt buckets by their tokens, decode buckets by their rows.
  double s_per_prompt_token = 0.0, s_per_decode_row = 0.0;
  auto predicted_s = [&](int32_t i) {
    if (i < n_prompt) {
      const bucket& pb = prompt_buckets_[static_cast<size_t>(i)];
      return s_per_prompt_token * pb.bs * pb.len;
    }
    return s_per_decode_row * decode_buckets_[static_cast<size_t>(i - n_prompt)].bs;
  };
  int32_t n_skipped = 0;
  for (int32_t i : warmup_order(n_prompt, n_total - n_prompt)) {
    const bool smallest = i == 0 || i == n_prompt;
    const double spent_s = std::chrono::duration<double>(clock_type::now() - t0).count();
    if (!smallest && cfg_.warmup_max_s > 0.0 && spent_s + predicted_s(i) > cfg_.warmup_max_s) {
      ++n_skipped;  // a later, smaller bucket may still fit
      continue;
    }
    const double s = run_bucket(i);
    if (i == 0) s_per_prompt_token = s / (static_cast<double>(prompt_buckets_[0].bs) * prompt_buckets_[0].len);
    if (i == n_prompt && i < n_total) s_per_decode_row = s / decode_buckets_[0].bs;
  }
  if (n_skipped > 0) {
    // Nothing compiles per bucket on the CPU executor: the workspaces are
    // reserved for the largest above, and a bucket left out costs its first
    // step nothing more than any later one.
    spdlog::info("Warmup: {} of {} buckets fit in --warmup-max-seconds {:g} (each predicted from the smallest of its "
                 "kind); the other {} need nothing before serving",
                 n_done, n_total, cfg_.warmup_max_s, n_skipped);
    if (cfg_.on_warmup_progress) cfg_.on_warmup_progress(100, n_done, n_total);
  }
  spdlog::info("Warmup finished in {:.2f} s ({} prompt + {} decode buckets; resident set {})",
               std::chrono::duration<double>(clock_type::now() - t0).count(), n_prompt_run, n_done - n_prompt_run,
               format_bytes(resident_bytes()));
}

int32_t engine::impl::measure_prefill_budget() {
  std::vector<float> logits;
  // Best of 5 runs, or of those within about 2 s; a second run only when the
  // first took under 1 s: a big mixture-of-experts step takes seconds, and
  // start-up waits for this.
  auto best_of = [&](int32_t n_new) {
    double best = 1e30, spent = 0.0;
    for (int rep = 0; rep < 5 && (rep == 0 || spent < (rep == 1 ? 1.0 : 2.0)); ++rep) {
      const auto t0 = clock_type::now();
      run_warmup_step(1, 0, n_new, logits, /*text_like=*/true);
      const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
      best = std::min(best, s);
      spent += s;
    }
    return best;
  };
  // A step costs about fixed + per_token * tokens: fixed from a 1-token step
  // (reading every weight once), per_token from the slope between 64 and 256
  // text-like prompt tokens (clamped to the model length). Text-like: with one
  // repeated token a mixture-of-experts model's rows all take the same k
  // experts, and the slope would miss the experts a real chunk reads.
  const int32_t lo = std::min(64, cfg_.sched.max_model_len / 2), hi = std::min(256, cfg_.sched.max_model_len);
  const double fixed_s = best_of(1);
  const double t_lo = best_of(lo), t_hi = best_of(hi);
  const double per_token_s = hi > lo ? std::max(1e-9, (t_hi - t_lo) / (hi - lo)) : std::max(1e-9, t_hi / hi);
  // The chunk whose compute costs about four 1-token steps, in multiples of 8,
  // within [k_min_auto_prefill_budget, 512]. Tuned on perf/scripts/bench_serving.sh --scenario throughput
  // (SmolLM2, 2 threads, 2026-11-25: fixed 5 ms, 0.7 ms per prompt token):
  // chunks of 16 (one 1-token step) gave TTFT p50 1165 ms against 265 ms
  // without chunked prefill; 32 gave 264 ms with ITL p99 53 ms (p50 33 ms);
  // 48 and 64 gave ITL p99 72 and 76 ms.
  // Rounded up: TTFT suffers far more from a chunk too small than ITL from one too large.
  // At least k_min_auto_prefill_budget (40): once batch-1 decode got faster
  // (2026-11-26: fixed 2.5-3.3 ms, 0.55 ms per prompt token) the rule gave 24.
  // perf/engine_serving_bench --reps 3, twice, same workload: 24 gave TTFT p50
  // 430 ms over HTTP; 32: 488 tok/s, TTFT p50 158 ms, ITL p99 35 ms; 40: 499
  // tok/s, 110 ms, 38 ms; 48: 498 tok/s, 149 ms, 42 ms; without chunked
  // prefill 497 tok/s, 144 ms, 84 ms. Qwen3-30B-A3B Q4_0 (2026-11-27,
  // perf/scripts/serving_bench.py --scenario throughput): the rule's 40 gave
  // 11.5 generated tok/s, 128 gave 11.95 (noise), ITL p99 1.5 s against 2.6 s.
  const auto budget = static_cast<int32_t>(std::clamp(std::ceil(4.0 * fixed_s / per_token_s / 8.0) * 8.0,
                                                      static_cast<double>(k_min_auto_prefill_budget), 512.0));
  spdlog::info("Chunked prefill budget: {} prompt tokens per step (auto: a 1-token step takes {:.2f} ms, a prompt "
               "token {:.3f} ms more)", budget, fixed_s * 1e3, per_token_s * 1e3);
  return budget;
}

void engine::impl::run_warmup_step(int32_t n_seqs, int32_t n_past, int32_t n_new, std::vector<float>& logits,
                                   bool text_like) {
  const int32_t block_size = exec_.block_size();
  const int32_t max_ctx = cfg_.sched.max_model_len;
  block_pool& pool = blocks_.pool();
  // Clamp to the model length and the cache so any configuration warms up.
  n_new = std::max(1, std::min(n_new, max_ctx));
  n_past = std::max(0, std::min(n_past, max_ctx - n_new));
  const int64_t blocks_per_seq = kv_block_manager::blocks_for(n_past + n_new, block_size);
  n_seqs = static_cast<int32_t>(std::max<int64_t>(1, std::min<int64_t>(n_seqs, pool.n_free() / std::max<int64_t>(1, blocks_per_seq))));
  if (blocks_per_seq > pool.n_free()) return;
  std::vector<int32_t> dummy(static_cast<size_t>(n_new), 1 % exec_.n_vocab());
  if (text_like) {
    uint32_t x = 2463534242u;  // xorshift32: the same tokens every start-up
    for (int32_t& t : dummy) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      t = static_cast<int32_t>(x % static_cast<uint32_t>(exec_.n_vocab()));
    }
  }
  // Recurrent models: a zeroed state slot each too (n_past positions of zeros: only the cost matters).
  if (block_pool* sp = blocks_.state_pool()) n_seqs = std::min(n_seqs, sp->n_free());
  if (n_seqs < 1) return;
  std::vector<block_table> tables, states;  // give their blocks and slots back when destroyed
  tables.reserve(static_cast<size_t>(n_seqs));
  states.reserve(static_cast<size_t>(n_seqs));
  for (int32_t i = 0; i < n_seqs; ++i) {
    tables.emplace_back(pool);
    tables.back().grow_to(n_past + n_new, block_size);
    if (block_pool* sp = blocks_.state_pool()) {
      states.emplace_back(*sp);
      states.back().grow_to(1, 1);
      exec_.zero_state(states.back().ids()[0]);
    }
  }
  forward_batch batch;
  for (size_t i = 0; i < tables.size(); ++i) {
    forward_seq f{dummy, n_past, tables[i].ids(), 1};
    if (!states.empty()) f.state_slot = states[i].ids()[0];
    batch.seqs.push_back(f);
  }
  logits.resize(static_cast<size_t>(n_seqs) * static_cast<size_t>(exec_.n_vocab()));
  exec_.forward(batch, logits.data(), nullptr);
}

}  // namespace spate
