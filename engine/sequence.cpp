#include "engine/sequence.h"

#include <algorithm>

namespace spate {

const char* finish_reason_name(finish_reason r) {
  switch (r) {
    case finish_reason::stop: return "stop";
    case finish_reason::length: return "length";
    case finish_reason::abort: return "abort";
    case finish_reason::error: return "error";
    case finish_reason::none: return "";
  }
  return "";
}

namespace {

eos_set make_eog(const tokenizer& tok, const sampling_params& p) {
  eos_set e;
  if (!p.ignore_eos) {
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
      if (tok.is_eog(id)) e.ids.push_back(id);
    }
  }
  for (int32_t id : p.stop_token_ids) e.ids.push_back(id);
  std::sort(e.ids.begin(), e.ids.end());
  e.ids.erase(std::unique(e.ids.begin(), e.ids.end()), e.ids.end());
  return e;
}

}  // namespace

sequence::sequence(int64_t id, std::vector<int32_t> prompt, const sampling_params& params, int32_t max_tokens,
                   uint64_t default_seed, const tokenizer& tok)
    : id_(id), tokens_(std::move(prompt)), n_prompt_(static_cast<int32_t>(tokens_.size())), params_(params), max_tokens_(max_tokens), tok_(tok),
      sampler_(params, default_seed), stops_(params.stop),
      constraint_(params.constraint ? params.constraint->start() : nullptr), detok_(tok), eog_(make_eog(tok, params)) {
  tokens_.reserve(tokens_.size() + static_cast<size_t>(max_tokens));
}

void sequence::constrain(std::span<float> logits) {
  eog_logits_.clear();
  for (int32_t id : eog_.ids) eog_logits_.push_back(logits[static_cast<size_t>(id)]);
  constraint_->mask_logits(logits);
  if (!constraint_->can_end()) return;
  for (size_t i = 0; i < eog_.ids.size(); ++i) logits[static_cast<size_t>(eog_.ids[i])] = eog_logits_[i];
}

sample_result sequence::sample_next(std::span<float> logits, std::string& delta) {
  if (constraint_) constrain(logits);
  sample_result r = sampler_.sample(logits, prompt(), generated(), eog_);
  delta = append(r.token);
  return r;
}

std::string sequence::append(int32_t token) {
  tokens_.push_back(token);
  std::string out;
  // An end-of-generation token (or a stop_token_id) ends the output and its text is not emitted.
  if (eog_.contains(token)) {
    finish_ = finish_reason::stop;
  } else {
    auto r = stops_.feed(detok_.push(token));
    out = std::move(r.text);
    if (r.stopped) finish_ = finish_reason::stop;
    if (constraint_ && !r.stopped) {
      constraint_->accept(token);
      if (constraint_->finished()) finish_ = finish_reason::stop;  // the grammar is complete
    }
  }
  if (finish_ == finish_reason::none && n_generated() >= max_tokens_) {
    finish_ = finish_reason::length;
  }
  if (finish_ != finish_reason::none && !stops_.stopped()) {
    // Release what was held back: bytes of an unfinished character, a possible stop-string prefix.
    auto r = stops_.feed(detok_.flush());
    out += r.text;
    if (!r.stopped) out += stops_.flush();
  }
  text_ += out;
  return out;
}

}  // namespace spate
