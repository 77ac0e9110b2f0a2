// What follows a forward pass on the engine thread: pooling the hidden rows
// of embedding requests, sampling (and verifying draft tokens), and delivering
// each request's events. The class is declared in engine_impl.h.
#include <algorithm>
#include <cmath>
#include <optional>
#include <spdlog/spdlog.h>

#include "engine/engine_impl.h"
#include "util/trace.h"

namespace spate {

void engine::impl::pool_embeddings(const scheduler_output& out) {
  const auto D = static_cast<size_t>(exec_.n_embd());
  const float* row = hidden_.data();
  std::vector<request_state*> done;
  for (const auto& q : out.seqs) {
    if (!q.hidden) continue;
    request_state& r = *live_.at(q.id);
    if (q.n_past == 0) r.pooled.assign(D, 0.0f);  // the first chunk, or a recompute after preemption
    for (int32_t i = 0; i < q.n_new; ++i, row += D) {
      const int32_t pos = q.n_past + i;
      if (r.embed == pooling_type::mean) {
        for (size_t d = 0; d < D; ++d) r.pooled[d] += row[d];
      } else if ((r.embed == pooling_type::cls && pos == 0) || (r.embed == pooling_type::last && pos == r.seq.n_prompt() - 1)) {
        std::copy(row, row + D, r.pooled.begin());
      }
    }
    if (q.samples) done.push_back(&r);  // the step reached the prompt's last token
  }
  for (request_state* r : done) {
    if (r->embed == pooling_type::mean) {
      for (float& v : r->pooled) v /= static_cast<float>(r->seq.n_prompt());
    }
    double norm = 0.0;
    for (float v : r->pooled) norm += static_cast<double>(v) * v;
    const float inv = norm > 0.0 ? static_cast<float>(1.0 / std::sqrt(norm)) : 0.0f;
    for (float& v : r->pooled) v *= inv;
    r->metrics.ttft_us = us_between(r->submitted, clock_type::now());
    finish_request(*r, finish_reason::stop);
  }
}


// Verifying drafts: row j of a request's rows holds the logits after its last
// token and drafts 0..j-1. Row j is sampled exactly as plain decoding samples
// that position (same masks, penalties and RNG draw, since the sequence has
// appended the same tokens before it); the draft at j is accepted when it
// equals the sampled token, else the sampled token replaces it and the rest
// of the rows are dropped. Each emitted token costs one RNG draw, as without
// speculation, so the output is plain decoding's token for token at any
// temperature. (This is the standard speculative-sampling rule for a
// deterministic draft: a draft d is kept with probability p(d), and on a
// rejection the token comes from p with d removed.)
void engine::impl::sample_and_deliver(const scheduler_output& out) {
  const size_t n_vocab = static_cast<size_t>(exec_.n_vocab());
  // One request's logit rows of a step and what sampling them gave.
  struct row_sample {
    request_state* r = nullptr;
    const scheduled_seq* q = nullptr;
    size_t first_row = 0;             // its first logit row (1 + q->n_draft rows)
    std::vector<sample_result> res;   // one per emitted token
    std::string delta;
    int32_t n_accepted = 0;           // drafts equal to the token sampled at their position
    std::string error;                // sampling threw (out of memory): the request fails, the rest go on
  };
  std::vector<row_sample> rows;
  rows.reserve(out.seqs.size());
  size_t next_row = 0;
  for (const auto& q : out.seqs) {
    if (!q.samples || q.hidden) continue;
    rows.push_back({live_.at(q.id).get(), &q, next_row, {}, {}, 0, {}});
    next_row += static_cast<size_t>(1 + q.n_draft);
  }
  // A task per request: masking and sampling touch only its own sequence (its
  // sampler, stop matcher, detokenizer and constraint; constraints that share
  // a grammar share a mask cache, which locks), so the result is the same
  // whichever thread runs it.
  std::optional<trace::scoped_span> span;
  span.emplace("sample", "engine");
  exec_.run_tasks(static_cast<int64_t>(rows.size()), [&](int64_t i) {
    row_sample& s = rows[static_cast<size_t>(i)];
    sequence& seq = s.r->seq;
    try {
      for (int32_t j = 0; j <= s.q->n_draft; ++j) {
        std::string d;
        const size_t row = s.first_row + static_cast<size_t>(j);
        s.res.push_back(seq.sample_next(std::span<float>(logits_.data() + row * n_vocab, n_vocab), d));
        s.delta += d;
        const bool match = j < s.q->n_draft && s.res.back().token == s.q->seq->spec_tokens[static_cast<size_t>(1 + j)];
        s.n_accepted += match;
        if (!match || seq.finished()) break;
      }
    } catch (const std::exception& e) {
      s.error = e.what();
    }
  });
  span.emplace("deliver", "engine");
  const auto now = clock_type::now();
  std::vector<request_state*> done;
  for (auto& s : rows) {
    request_state& r = *s.r;
    if (!s.error.empty()) {
      fail_request(r, "internal error while sampling: " + s.error);
      continue;
    }
    local_stats_.generated_tokens += static_cast<int64_t>(s.res.size());
    if (s.q->n_draft > 0) count_speculation(*s.q, s.n_accepted);
    // Tokens verified together arrive together: the first one's gap is the
    // step's, the others' 0.
    for (size_t t = 0; t < s.res.size(); ++t) {
      if (r.seq.n_generated() == static_cast<int32_t>(s.res.size()) && t == 0) {
        r.metrics.ttft_us = us_between(r.submitted, now);
      } else {
        r.metrics.itl_us.push_back(t == 0 ? us_between(r.last_token, now) : 0);
      }
    }
    r.last_token = now;
    if (!r.seq.finished() && r.seq.n_tokens() >= cfg_.sched.max_model_len) r.seq.finish_with(finish_reason::length);
    if (s.q->n_draft > 0 && !r.seq.finished()) sched_.on_verified(*s.q, s.n_accepted);
    engine_event ev;
    ev.type = engine_event::kind::tokens;
    ev.request_id = r.seq.id();
    for (auto& res : s.res) {
      ev.token_ids.push_back(res.token);
      if (r.seq.params().logprobs) ev.logprobs.push_back({res.token, res.logprob, std::move(res.top_logprobs)});
    }
    ev.text = std::move(s.delta);
    deliver(r.on_event, ev);
    if (r.seq.finished()) done.push_back(&r);
  }
  for (auto* r : done) finish_request(*r, r->seq.finish());
}

void engine::impl::count_speculation(const scheduled_seq& q, int32_t n_accepted) {
  ++local_stats_.spec_num_drafts;
  local_stats_.spec_num_draft_tokens += q.n_draft;
  local_stats_.spec_num_accepted_tokens += n_accepted;
  for (int32_t j = 0; j < n_accepted; ++j) ++local_stats_.spec_accepted_per_pos[static_cast<size_t>(j)];
}

}  // namespace spate
