#include "protocol/harmony_constraint.h"

#include <algorithm>
#include <array>
#include <limits>
#include <span>

#include "tokenizer/tokenizer.h"

namespace spate::api {
namespace {

constexpr float k_masked = -std::numeric_limits<float>::infinity();
constexpr size_t k_max_recipients = 64;
constexpr std::string_view k_final = "final";
constexpr std::string_view k_to = "to=";

// The rules of the headers: which words a header may not write.
struct header_rules {
  bool no_final = false;
  std::vector<std::string> recipients;  // "functions.NAME"; empty: any
  bool active() const { return no_final || !recipients.empty(); }
};

// Follows a header's text word by word and tells when it breaks the rules:
// the word after "<|channel|>" on its way to "final", or a word "to=X" whose
// X is not (a prefix of) an allowed recipient. Plain data, cheap to copy: one
// copy per candidate token.
class header_scan {
 public:
  explicit header_scan(const header_rules* rules) : rules_(rules) {}

  void marker(std::string_view m) {
    end_word();
    if (m == k_harmony_message || m == k_harmony_start || m == k_harmony_end) done_ = true;
    ctx_ = m == k_harmony_channel ? ctx::channel : ctx::word_start;
  }
  void text(std::string_view t) {
    for (const char c : t) {
      if (done_ || bad_) return;
      byte(c);
    }
  }
  // The header so far: its markers are whole in it.
  void header(std::string_view h) {
    size_t i = 0;
    while (i < h.size() && !bad_) {
      const std::string_view rest = h.substr(i);
      if (rest.starts_with(k_harmony_channel) || rest.starts_with(k_harmony_constrain)) {
        const std::string_view m = rest.starts_with(k_harmony_channel) ? k_harmony_channel : k_harmony_constrain;
        marker(m);
        i += m.size();
        continue;
      }
      byte(h[i++]);
    }
  }
  bool bad() const { return bad_; }

 private:
  enum class ctx : uint8_t { word_start, to, plain, channel, recipient };

  void byte(char c) {
    if (c == ' ') {
      end_word();
      ctx_ = ctx::word_start;
      return;
    }
    switch (ctx_) {
      case ctx::word_start:
      case ctx::to:
        if (c != k_to[n_]) {
          ctx_ = ctx::plain;
          return;
        }
        ctx_ = ctx::to;
        if (++n_ == k_to.size()) {
          ctx_ = ctx::recipient;
          n_ = 0;
          alive_ = rules_->recipients.size() >= 64 ? ~uint64_t{0} : (uint64_t{1} << rules_->recipients.size()) - 1;
        }
        return;
      case ctx::channel:
        if (n_ < k_final.size() && c != k_final[n_]) deviated_ = true;
        ++n_;
        bad_ = bad_ || (rules_->no_final && !deviated_);
        return;
      case ctx::recipient:
        for (size_t r = 0; r < rules_->recipients.size(); ++r) {
          const std::string& name = rules_->recipients[r];
          if (n_ >= name.size() || name[n_] != c) alive_ &= ~(uint64_t{1} << r);
        }
        ++n_;
        bad_ = bad_ || (!rules_->recipients.empty() && alive_ == 0);
        return;
      case ctx::plain: return;
    }
  }
  // A recipient word is whole: one allowed recipient must be exactly it.
  void end_word() {
    if (ctx_ == ctx::recipient && !rules_->recipients.empty()) {
      bool whole = false;
      for (size_t r = 0; r < rules_->recipients.size(); ++r) whole = whole || ((alive_ >> r & 1) && rules_->recipients[r].size() == n_);
      bad_ = bad_ || !whole;
    }
    n_ = 0;
    deviated_ = false;
  }

  const header_rules* rules_;
  ctx ctx_ = ctx::word_start;
  size_t n_ = 0;  // bytes of the current word (after "to=" for a recipient)
  bool deviated_ = false;
  uint64_t alive_ = 0;
  bool bad_ = false;
  bool done_ = false;
};

class harmony_constraint final : public token_constraint {
 public:
  harmony_constraint(const harmony_constraints& c, const header_rules& rules, const harmony_options& start,
                     std::shared_ptr<const harmony_vocab> vocab)
      : c_(c), rules_(rules), vocab_(std::move(vocab)), machine_(start, tool_call_ids(0)) {
    machine_.feed("", nullptr);  // the prompt's open message, if any, opens now
    if (machine_.where() == harmony_stream::place::body) start_text();
    check_budget();
  }

  void mask_logits(std::span<float> logits) override {
    if (forcing_) {
      force(logits, vocab_->close_tokens()[*forcing_]);
      return;
    }
    if (inner_) {
      inner_->mask_logits(logits);
      for (const int32_t t : vocab_->marker_tokens()) logits[static_cast<size_t>(t)] = k_masked;
      return;
    }
    if (machine_.where() == harmony_stream::place::header && rules_.active() && machine_.pending().empty()) mask_header(logits);
  }

  bool can_end() const override {
    if (forcing_) return false;
    if (inner_) return inner_->can_end();
    return !c_.call_required || called_;
  }

  void accept(int32_t token) override {
    if (token < 0 || static_cast<size_t>(token) >= vocab_->pieces().size()) return;
    if (inner_) inner_->accept(token);
    const uint32_t before = machine_.n_messages();
    const bool was_reasoning = machine_.in_reasoning();
    const std::string& piece = vocab_->pieces()[static_cast<size_t>(token)];
    machine_.feed(piece, nullptr);
    if (!inner_ && machine_.n_messages() != before && machine_.where() == harmony_stream::place::body) start_text();
    if (forcing_) {
      if (token != vocab_->close_tokens()[*forcing_] || ++*forcing_ == vocab_->close_tokens().size()) forcing_.reset();
      return;
    }
    if (was_reasoning) {
      ++n_reasoning_;
      track_utf8(piece);
    } else {
      utf8_need_ = 0;
    }
    check_budget();
  }

  bool finished() const override { return inner_ && inner_->finished(); }

 private:
  // A message's text begins: its grammar, if it has one, runs to the end of the output.
  void start_text() {
    const harmony_stream::body_kind kind = machine_.body();
    if (kind == harmony_stream::body_kind::call) {
      called_ = true;
      const std::string_view name = std::string_view(machine_.header().recipient).substr(std::string_view("functions.").size());
      for (const auto& [fn, spec] : c_.calls) {
        if (fn == name && spec) inner_ = spec->start();
      }
    } else if (kind == harmony_stream::body_kind::content && machine_.header().channel == "final" && c_.answer) {
      inner_ = c_.answer->start();
    }
  }

  // A spent budget in an analysis message's text: force its end (at a whole character).
  void check_budget() {
    if (c_.reasoning_budget && !forcing_ && machine_.in_reasoning() && n_reasoning_ >= *c_.reasoning_budget && utf8_need_ == 0 &&
        !vocab_->close_tokens().empty()) {
      forcing_ = 0;
    }
  }

  // utf8_need_: continuation bytes still missing from the reasoning's last character.
  void track_utf8(const std::string& p) {
    for (const char ch : p) {
      const auto b = static_cast<unsigned char>(ch);
      if (utf8_need_ > 0 && (b & 0xC0) == 0x80) --utf8_need_;
      else utf8_need_ = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : 0;
    }
  }

  static void force(std::span<float> logits, int32_t token) {
    const float v = logits[static_cast<size_t>(token)];
    std::fill(logits.begin(), logits.end(), k_masked);
    logits[static_cast<size_t>(token)] = v == k_masked ? 0.0f : v;
  }

  void mask_header(std::span<float> logits) const {
    header_scan base(&rules_);
    base.header(machine_.header_text());
    const auto& pieces = vocab_->pieces();
    const auto& markers = vocab_->marker_tokens();
    for (size_t t = 0; t < pieces.size(); ++t) {
      if (logits[t] == k_masked || pieces[t].empty()) continue;
      header_scan s = base;
      if (std::binary_search(markers.begin(), markers.end(), static_cast<int32_t>(t))) s.marker(pieces[t]);
      else s.text(pieces[t]);
      if (s.bad()) logits[t] = k_masked;
    }
  }

  harmony_constraints c_;
  header_rules rules_;
  std::shared_ptr<const harmony_vocab> vocab_;
  harmony_stream machine_;
  std::unique_ptr<token_constraint> inner_;  // the grammar of the current constrained text
  bool called_ = false;                      // a call's text has begun
  int32_t n_reasoning_ = 0;                  // tokens accepted inside analysis messages' text
  int utf8_need_ = 0;
  std::optional<size_t> forcing_;  // next index into close_tokens() while forcing
};

class harmony_spec final : public constraint_spec {
 public:
  harmony_spec(harmony_constraints c, harmony_options start, std::shared_ptr<const harmony_vocab> vocab)
      : c_(std::move(c)), start_(std::move(start)), vocab_(std::move(vocab)) {
    start_.calls = !c_.calls.empty();  // as the output parser reads them (output_parser.h)
    start_.reasoning = true;            // the budget counts analysis text whether or not it is shown
    rules_.no_final = c_.call_required;
    if (!c_.calls.empty() && c_.calls.size() <= k_max_recipients) {
      for (const auto& [name, spec] : c_.calls) rules_.recipients.push_back("functions." + name);
    }
  }
  std::unique_ptr<token_constraint> start() const override {
    return std::make_unique<harmony_constraint>(c_, rules_, start_, vocab_);
  }

 private:
  harmony_constraints c_;
  header_rules rules_;
  harmony_options start_;
  std::shared_ptr<const harmony_vocab> vocab_;
};

}  // namespace

harmony_vocab::harmony_vocab(const tokenizer& tok) {
  const auto n = static_cast<size_t>(tok.n_vocab());
  pieces_.resize(n);
  for (size_t id = 0; id < n; ++id) pieces_[id] = tok.token_to_piece(static_cast<int32_t>(id), false);
  static constexpr std::array<std::string_view, 7> k_markers = {k_harmony_start, k_harmony_channel, k_harmony_message,
                                                                 k_harmony_constrain, k_harmony_end, k_harmony_call,
                                                                 k_harmony_return};
  for (size_t id = 0; id < n; ++id) {
    if (std::find(k_markers.begin(), k_markers.end(), pieces_[id]) != k_markers.end()) markers_.push_back(static_cast<int32_t>(id));
  }
  markers_are_text_ = true;
  for (const std::string_view m : {k_harmony_start, k_harmony_channel, k_harmony_message, k_harmony_end}) {
    const std::vector<int32_t> ids = tok.encode(m, /*add_special=*/false, /*parse_special=*/true);
    markers_are_text_ = markers_are_text_ && ids.size() == 1 && pieces_[static_cast<size_t>(ids[0])] == m;
  }
  const std::string close = std::string(k_harmony_end) + std::string(k_harmony_start) + "assistant" + std::string(k_harmony_final);
  close_tokens_ = tok.encode(close, /*add_special=*/false, /*parse_special=*/true);
}

std::shared_ptr<const constraint_spec> make_harmony_constraint(harmony_constraints c, harmony_options start,
                                                               std::shared_ptr<const harmony_vocab> vocab) {
  return std::make_shared<harmony_spec>(std::move(c), std::move(start), std::move(vocab));
}

}  // namespace spate::api
