#include "protocol/reasoning_constraint.h"

#include <algorithm>
#include <limits>
#include <span>

#include "tokenizer/tokenizer.h"

namespace spate::api {
namespace {

using state = reasoning_splitter::state;
constexpr float k_masked = -std::numeric_limits<float>::infinity();

// A splitter inside the reasoning with m bytes of "</think>" matched.
reasoning_splitter reasoning_with(size_t m) {
  reasoning_splitter s(reasoning_start::reasoning);
  s.feed("x", nullptr);  // leaves the lead-in
  s.feed(k_think_close.substr(0, m), nullptr);
  return s;
}

// Fed piece, s reaches the content with content bytes in the same piece.
bool straddles(reasoning_splitter s, const std::string& piece) {
  reasoning_split out;
  s.feed(piece, &out);
  return s.current() == state::content && !out.content.empty();
}

class reasoning_constraint final : public token_constraint {
 public:
  reasoning_constraint(std::shared_ptr<const constraint_spec> inner_spec, reasoning_start start, std::shared_ptr<const reasoning_vocab> vocab,
                       std::optional<int32_t> budget)
      : inner_spec_(std::move(inner_spec)), vocab_(std::move(vocab)), start_(start), splitter_(start), budget_(budget) {
    // The optional lead-in may turn out to be content: the grammar runs from the first token.
    if (start_ == reasoning_start::optional && inner_spec_) inner_ = inner_spec_->start();
    if (start_ == reasoning_start::reasoning && budget_ && *budget_ == 0) forcing_ = 0;
  }

  void mask_logits(std::span<float> logits) override {
    if (forcing_) {
      force(logits, vocab_->close_tokens()[*forcing_]);
      return;
    }
    const state s = splitter_.current();
    if (s == state::content) {
      if (inner_) inner_->mask_logits(logits);
      return;
    }
    if (!inner_spec_) return;  // a budget alone: the output is free
    if (optional_lead_in()) {
      mask_optional(logits);
      return;
    }
    if (s == state::reasoning) {
      for (const int32_t t : vocab_->straddling(splitter_.close_matched())) logits[static_cast<size_t>(t)] = k_masked;
      return;
    }
    for (const int32_t t : vocab_->closing_candidates()) {  // the lead-in of a reasoning start (a few tokens)
      if (straddles(splitter_, piece(t))) logits[static_cast<size_t>(t)] = k_masked;
    }
  }

  bool can_end() const override {
    if (forcing_) return false;
    if (splitter_.current() == state::content) return inner_ ? inner_->can_end() : true;
    if (optional_lead_in() && inner_spec_) return inner_ && inner_->can_end();
    return true;  // inside the reasoning the model may stop, as without a grammar
  }

  void accept(int32_t token) override {
    if (token < 0 || static_cast<size_t>(token) >= vocab_->pieces().size()) return;
    const state before = splitter_.current();
    if (before == state::content) {
      if (inner_) inner_->accept(token);
      return;
    }
    const bool was_optional = optional_lead_in();
    if (was_optional && inner_) {
      if (std::binary_search(think_only_.begin(), think_only_.end(), token)) {
        inner_.reset();  // the grammar did not allow it: the output is reasoning or nothing
      } else {
        inner_->accept(token);
      }
    }
    const std::string& p = piece(token);
    splitter_.feed(p, nullptr);
    track_utf8(p);
    if (forcing_ && ++*forcing_ == vocab_->close_tokens().size()) forcing_.reset();
    const state after = splitter_.current();
    if (after == state::content) {
      forcing_.reset();
      if (!was_optional) inner_ = inner_spec_ ? inner_spec_->start() : nullptr;  // content starts at the next token
      return;
    }
    if (after == state::lead_in && start_ == reasoning_start::optional) return;
    // A token of the reasoning.
    if (was_optional) inner_.reset();  // the grammar restarts after "</think>"
    ++n_reasoning_;
    if (budget_ && !forcing_ && n_reasoning_ >= *budget_ && utf8_need_ == 0) forcing_ = 0;
  }

  bool finished() const override { return splitter_.current() == state::content && inner_ && inner_->finished(); }

 private:
  bool optional_lead_in() const { return start_ == reasoning_start::optional && splitter_.current() == state::lead_in; }
  const std::string& piece(int32_t t) const { return vocab_->pieces()[static_cast<size_t>(t)]; }

  static void force(std::span<float> logits, int32_t token) {
    const float v = logits[static_cast<size_t>(token)];
    std::fill(logits.begin(), logits.end(), k_masked);
    logits[static_cast<size_t>(token)] = v == k_masked ? 0.0f : v;
  }

  // The grammar's tokens (none once it is dead), plus those that keep
  // "<think>" possible; think_only_ lists the latter that the grammar refused.
  void mask_optional(std::span<float> logits) {
    const auto& cands = vocab_->lead_in_candidates();
    saved_.resize(cands.size());
    for (size_t i = 0; i < cands.size(); ++i) saved_[i] = logits[static_cast<size_t>(cands[i])];
    if (inner_) {
      inner_->mask_logits(logits);
    } else {
      std::fill(logits.begin(), logits.end(), k_masked);
    }
    think_only_.clear();
    for (size_t i = 0; i < cands.size(); ++i) {
      const int32_t t = cands[i];
      if (logits[static_cast<size_t>(t)] != k_masked) continue;
      reasoning_splitter s = splitter_;
      s.feed(piece(t), nullptr);
      if (s.current() == state::content) continue;
      logits[static_cast<size_t>(t)] = saved_[i];
      think_only_.push_back(t);  // cands are sorted, so is this
    }
  }

  // utf8_need_: continuation bytes still missing from the text's last character.
  void track_utf8(const std::string& p) {
    for (const char ch : p) {
      const auto b = static_cast<unsigned char>(ch);
      if (utf8_need_ > 0 && (b & 0xC0) == 0x80) --utf8_need_;
      else utf8_need_ = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : 0;
    }
  }

  std::shared_ptr<const constraint_spec> inner_spec_;
  std::shared_ptr<const reasoning_vocab> vocab_;
  reasoning_start start_;
  reasoning_splitter splitter_;
  std::unique_ptr<token_constraint> inner_;  // the grammar of the content (or of the optional lead-in), when running
  std::optional<int32_t> budget_;
  int32_t n_reasoning_ = 0;
  std::optional<size_t> forcing_;  // next index into close_tokens() while forcing
  int utf8_need_ = 0;
  std::vector<int32_t> think_only_;
  std::vector<float> saved_;
};

class reasoning_spec final : public constraint_spec {
 public:
  reasoning_spec(std::shared_ptr<const constraint_spec> inner, reasoning_start start, std::shared_ptr<const reasoning_vocab> vocab,
                 std::optional<int32_t> budget)
      : inner_(std::move(inner)), start_(start), vocab_(std::move(vocab)), budget_(budget) {}
  std::unique_ptr<token_constraint> start() const override {
    return std::make_unique<reasoning_constraint>(inner_, start_, vocab_, budget_);
  }

 private:
  std::shared_ptr<const constraint_spec> inner_;
  reasoning_start start_;
  std::shared_ptr<const reasoning_vocab> vocab_;
  std::optional<int32_t> budget_;
};

}  // namespace

reasoning_vocab::reasoning_vocab(const tokenizer& tok) {
  const auto n = static_cast<size_t>(tok.n_vocab());
  pieces_.resize(n);
  for (size_t id = 0; id < n; ++id) pieces_[id] = tok.token_to_piece(static_cast<int32_t>(id), false);
  close_tokens_ = tok.encode(k_think_close, /*add_special=*/false, /*parse_special=*/true);
  const auto spelled = [this](const std::vector<int32_t>& ids) {
    std::string text;
    for (const int32_t id : ids) text += pieces_.at(static_cast<size_t>(id));
    return text;
  };
  tags_are_text_ = spelled(close_tokens_) == k_think_close &&
                   spelled(tok.encode(k_think_open, /*add_special=*/false, /*parse_special=*/true)) == k_think_open;
  std::array<reasoning_splitter, 8> in_tag{reasoning_with(0), reasoning_with(1), reasoning_with(2), reasoning_with(3),
                                           reasoning_with(4), reasoning_with(5), reasoning_with(6), reasoning_with(7)};
  std::array<reasoning_splitter, 7> lead_in{reasoning_splitter(reasoning_start::optional), reasoning_splitter(reasoning_start::optional),
                                            reasoning_splitter(reasoning_start::optional), reasoning_splitter(reasoning_start::optional),
                                            reasoning_splitter(reasoning_start::optional), reasoning_splitter(reasoning_start::optional),
                                            reasoning_splitter(reasoning_start::optional)};
  for (size_t k = 1; k < lead_in.size(); ++k) lead_in[k].feed(k_think_open.substr(0, k), nullptr);
  for (size_t id = 0; id < n; ++id) {
    const std::string& p = pieces_[id];
    if (p.empty()) continue;
    const auto t = static_cast<int32_t>(id);
    if (p.find('>') != std::string::npos) {
      closing_.push_back(t);
      for (size_t m = 0; m < in_tag.size(); ++m) {
        if (straddles(in_tag[m], p)) straddling_[m].push_back(t);
      }
    }
    if (std::string_view(" \t\r\n<think>").find(p[0]) == std::string_view::npos) continue;
    for (const reasoning_splitter& s0 : lead_in) {
      reasoning_splitter s = s0;
      s.feed(p, nullptr);
      if (s.current() != state::content) {
        lead_in_.push_back(t);
        break;
      }
    }
  }
}

std::shared_ptr<const constraint_spec> make_reasoning_constraint(std::shared_ptr<const constraint_spec> inner, reasoning_start start,
                                                                 std::shared_ptr<const reasoning_vocab> vocab,
                                                                 std::optional<int32_t> budget) {
  return std::make_shared<reasoning_spec>(std::move(inner), start, std::move(vocab), budget);
}

}  // namespace spate::api
