// A forward_executor without weights for engine-loop tests, a tiny real
// SentencePiece vocabulary to go with it, and a gate that parks forward calls
// so a test can hold the engine inside a step.
//
// The fake "model" keeps a paged KV store of token ids (one int32 per block
// slot): forward writes each new token into its slot through the sequence's
// block table, then reads the whole context back through the same table and
// picks the next token from it (fake_next_token). A request therefore gets
// exactly expected_tokens(prompt) only if the engine paged its KV correctly
// (right blocks, nothing overwritten by another sequence, prefix-cache hits
// holding the right tokens, recompute after preemption complete). Batches that
// break the forward_executor contract (block table too short, block id out of
// range, two sequences writing one slot, bad token ids or n_logits) make
// forward throw std::invalid_argument and are counted in n_invalid_batches();
// context positions read before any forward wrote them are counted in
// n_unwritten_reads() (and read as <unk>).
//
// Recurrent mode (set_recurrent): the fake also keeps state slots, each the
// FNV-1a hash of the tokens fed through it and their count, and picks the
// next token from the sequence's slot instead of the KV (as a recurrent layer
// would), so a request gets expected_tokens only if the engine zeroed, copied
// and carried its state right. A slot whose count is not the sequence's
// n_past, or whose hash disagrees with the context read back from the KV, is
// counted in n_state_mismatches().
//
// Thread-safety: forward() and reserve() are called by one thread at a time
// (the engine thread, or start()'s caller during warmup), as the interface
// requires; every other member may be called from any thread.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "model/forward_executor.h"
#include "tokenizer/tokenizer.h"

namespace spate::test_engine {

// The tiny vocabulary: <unk> = 0, <s> = 1, </s> = 2 (EOS), then the words
// "a".."z" (ids 3..28), "▁" and two byte tokens. 31 tokens.
inline constexpr int32_t k_unk = 0, k_bos = 1, k_eos = 2;
inline constexpr int32_t k_first_word = 3, k_n_words = 26;

inline vocab_spec tiny_vocab() {
  vocab_spec s;
  s.model = "llama";
  s.tokens = {"<unk>", "<s>", "</s>"};
  s.token_types = {static_cast<int32_t>(token_type::unknown), static_cast<int32_t>(token_type::control),
                   static_cast<int32_t>(token_type::control)};
  for (char c = 'a'; c <= 'z'; ++c) {
    s.tokens.emplace_back(1, c);
    s.token_types.push_back(static_cast<int32_t>(token_type::normal));
  }
  s.tokens.push_back("\xE2\x96\x81");  // "▁", the SentencePiece space
  s.token_types.push_back(static_cast<int32_t>(token_type::normal));
  for (const char* byte : {"<0x0A>", "<0x21>"}) {
    s.tokens.push_back(byte);
    s.token_types.push_back(static_cast<int32_t>(token_type::byte));
  }
  s.unk_id = k_unk;
  s.bos_id = k_bos;
  s.eos_id = k_eos;
  return s;
}

// Word token of a letter 'a'..'z'.
inline int32_t word(char c) { return k_first_word + (c - 'a'); }

// Word tokens of a string of letters, e.g. words("abc").
inline std::vector<int32_t> words(std::string_view letters) {
  std::vector<int32_t> out;
  for (char c : letters) out.push_back(word(c));
  return out;
}

// The fake model's rule: the token that follows context (all tokens at
// positions [0, context.size())). A word chosen by an FNV-1a hash of the whole
// context, or EOS once the context holds eos_at_length tokens (0: never).
inline int32_t fake_next_token(std::span<const int32_t> context, int32_t eos_at_length) {
  if (eos_at_length > 0 && static_cast<int32_t>(context.size()) == eos_at_length) return k_eos;
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : context) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(t));
    h *= 1099511628211ull;
  }
  return k_first_word + static_cast<int32_t>(h % k_n_words);
}

// What greedy decoding of the fake model gives for prompt without any engine:
// up to max_tokens tokens, ending early with (and including) EOS. kv_window >
// 0: the model reads only the last kv_window tokens (see fake_executor).
inline std::vector<int32_t> expected_tokens(std::vector<int32_t> prompt, int32_t max_tokens, int32_t eos_at_length = 0,
                                            int32_t kv_window = 0) {
  std::vector<int32_t> out;
  while (static_cast<int32_t>(out.size()) < max_tokens) {
    std::span<const int32_t> context(prompt);
    if (kv_window > 0 && context.size() > static_cast<size_t>(kv_window)) context = context.last(static_cast<size_t>(kv_window));
    const bool eos = eos_at_length > 0 && static_cast<int32_t>(prompt.size()) == eos_at_length;
    const int32_t t = eos ? k_eos : fake_next_token(context, 0);
    out.push_back(t);
    prompt.push_back(t);
    if (t == k_eos) break;
  }
  return out;
}

// The soft fake's logits after context (fake_executor::set_soft_logits): a
// spread distribution over the whole vocabulary, a different one per context,
// with logits in [0, 4).
inline void fake_soft_logits(std::span<const int32_t> context, std::span<float> row) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : context) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(t));
    h *= 1099511628211ull;
  }
  for (size_t i = 0; i < row.size(); ++i) {
    const uint64_t x = (h ^ (0x9e3779b97f4a7c15ull * (i + 1))) * 0xbf58476d1ce4e5b9ull;
    row[i] = static_cast<float>((x >> 40) % 1000) / 250.0f;
  }
}

// Parks forward calls while closed. Calls arriving at a closed gate take a
// ticket in arrival order and wait until released. Any thread.
class forward_gate {
 public:
  // Calls from now on park (calls already inside forward are not affected).
  void close() {
    std::lock_guard lk(mu_);
    closed_ = true;
    released_ = n_arrived_;
  }
  // Releases every parked call and lets later ones pass.
  void open() {
    std::lock_guard lk(mu_);
    closed_ = false;
    cv_.notify_all();
  }
  // Lets exactly one call through (the longest parked, or the next to come);
  // the gate stays closed.
  void pass_one() {
    std::lock_guard lk(mu_);
    ++released_;
    cv_.notify_all();
  }
  // Blocks until a call is parked at the gate. Precondition: closed, and a
  // forward call will come (else this waits forever).
  void wait_parked() {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return n_arrived_ > released_; });
  }
  // Called at the start of forward: returns at once while open, else parks
  // until released.
  void enter() {
    std::unique_lock lk(mu_);
    if (!closed_) return;
    const int64_t ticket = n_arrived_++;
    cv_.notify_all();
    cv_.wait(lk, [&] { return !closed_ || ticket < released_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
  int64_t n_arrived_ = 0;  // calls that found the gate closed
  int64_t released_ = 0;   // tickets below this may pass
};

class fake_executor final : public forward_executor {
 public:
  // eos_at_length: see fake_next_token (0: the model never emits EOS).
  // kv_window > 0: a sliding-window fake; the next token hashes only the last
  // kv_window tokens of the context, and only those positions are read back.
  // n_state_slots > 0: recurrent mode (set_recurrent).
  fake_executor(int32_t n_vocab, int32_t n_kv_blocks, int32_t block_size, int32_t eos_at_length = 0,
                int32_t kv_window = 0, int32_t n_state_slots = 0)
      : n_vocab_(n_vocab), n_kv_blocks_(n_kv_blocks), block_size_(block_size), eos_at_length_(eos_at_length),
        kv_window_(kv_window),
        kv_(static_cast<size_t>(n_kv_blocks) * static_cast<size_t>(block_size), -1) {
    set_recurrent(n_state_slots);
  }

  int32_t n_vocab() const override { return n_vocab_; }
  int32_t n_kv_blocks() const override { return n_kv_blocks_; }
  int32_t block_size() const override { return block_size_; }
  // Hidden rows: {token, position, 1, 0} (fake_hidden_row), so that pooling is checkable.
  int32_t n_embd() const override { return k_fake_n_embd; }
  static constexpr int32_t k_fake_n_embd = 4;
  int32_t kv_window() const override { return kv_window_; }

  void reserve(int64_t max_tokens, int64_t max_logit_rows, int32_t max_ctx) override {
    std::lock_guard lk(mu_);
    ++n_reserve_calls_;
    reserved_tokens_ = max_tokens;
    reserved_rows_ = max_logit_rows;
    reserved_ctx_ = max_ctx;
  }

  void forward(const forward_batch& batch, float* logits, float* hidden) override {
    gate_.enter();
    {
      std::lock_guard lk(mu_);
      ++n_calls_;
      for (const auto& q : batch.seqs) n_forward_tokens_ += static_cast<int64_t>(q.tokens.size());
      max_batch_seqs_ = std::max(max_batch_seqs_, static_cast<int64_t>(batch.seqs.size()));
      if (fail_at_call_ == n_calls_) throw std::runtime_error("injected failure at forward call " + std::to_string(n_calls_));
      if (fail_prompt_ && prefills(batch, *fail_prompt_)) {
        fail_prompt_.reset();
        throw std::runtime_error("injected failure for a prompt");
      }
    }
    try {
      run(batch, logits, hidden);
    } catch (const std::invalid_argument&) {
      std::lock_guard lk(mu_);
      ++n_invalid_batches_;
      throw;
    }
  }

  forward_gate& gate() { return gate_; }

  // Recurrent mode with n_slots state slots (see above). Before start().
  void set_recurrent(int32_t n_slots) { states_.assign(static_cast<size_t>(n_slots), fake_state{}); }
  int32_t n_state_slots() const override { return static_cast<int32_t>(states_.size()); }
  size_t state_slot_bytes() const override { return sizeof(fake_state); }
  void copy_state(int32_t src, int32_t dst) override {
    states_.at(static_cast<size_t>(dst)) = states_.at(static_cast<size_t>(src));
    std::lock_guard lk(mu_);
    ++n_state_copies_;
  }
  void zero_state(int32_t dst) override {
    states_.at(static_cast<size_t>(dst)) = fake_state{};
    std::lock_guard lk(mu_);
    ++n_state_zeroes_;
  }
  int64_t n_state_copies() const {
    std::lock_guard lk(mu_);
    return n_state_copies_;
  }
  int64_t n_state_zeroes() const {
    std::lock_guard lk(mu_);
    return n_state_zeroes_;
  }
  int64_t n_state_mismatches() const {
    std::lock_guard lk(mu_);
    return n_state_mismatches_;
  }

  // KV copying (the disk tier): a block's bytes are its slots' token ids.
  // With copy_enabled false the fake cannot copy its KV (kv_block_bytes 0).
  size_t kv_block_bytes() const override { return copy_enabled_ ? static_cast<size_t>(block_size_) * sizeof(int32_t) : 0; }
  uint64_t kv_format_id() const override { return 0xfa6e0000ull + static_cast<uint64_t>(block_size_); }
  void copy_kv_block_out(int32_t block, std::span<uint8_t> out) const override {
    if (out.size() != kv_block_bytes()) invalid("copy_kv_block_out: wrong size");
    std::memcpy(out.data(), kv_.data() + static_cast<size_t>(block) * static_cast<size_t>(block_size_), out.size());
  }
  void copy_kv_block_in(int32_t block, std::span<const uint8_t> in) override {
    if (in.size() != kv_block_bytes()) invalid("copy_kv_block_in: wrong size");
    std::memcpy(kv_.data() + static_cast<size_t>(block) * static_cast<size_t>(block_size_), in.data(), in.size());
    std::lock_guard lk(mu_);
    ++n_blocks_copied_in_;
  }
  void set_copy_enabled(bool on) { copy_enabled_ = on; }
  int64_t n_blocks_copied_in() const {
    std::lock_guard lk(mu_);
    return n_blocks_copied_in_;
  }
  // Tokens computed by forward calls (every sequence's new tokens, warmup included).
  int64_t n_forward_tokens() const {
    std::lock_guard lk(mu_);
    return n_forward_tokens_;
  }

  // On: every logit row is fake_soft_logits of its context (for sampling
  // tests) instead of one-hot on fake_next_token. Before start().
  void set_soft_logits(bool on) { soft_logits_ = on; }

  // Forward call number n (1-based, counting every call including warmup's)
  // throws std::runtime_error.
  void fail_at_call(int64_t n) {
    std::lock_guard lk(mu_);
    fail_at_call_ = n;
  }
  // The next forward call that prefills exactly this prompt (from position 0)
  // throws std::runtime_error; once.
  void fail_prefill_of(std::vector<int32_t> prompt) {
    std::lock_guard lk(mu_);
    fail_prompt_ = std::move(prompt);
  }

  int64_t n_calls() const {
    std::lock_guard lk(mu_);
    return n_calls_;
  }
  int64_t n_invalid_batches() const {
    std::lock_guard lk(mu_);
    return n_invalid_batches_;
  }
  // Context positions read that no forward had written (a request reading
  // them would be a paging bug; warmup's dummy decodes do it on purpose).
  int64_t n_unwritten_reads() const {
    std::lock_guard lk(mu_);
    return n_unwritten_reads_;
  }
  int64_t max_batch_seqs() const {
    std::lock_guard lk(mu_);
    return max_batch_seqs_;
  }
  int64_t n_reserve_calls() const {
    std::lock_guard lk(mu_);
    return n_reserve_calls_;
  }
  int64_t reserved_tokens() const {
    std::lock_guard lk(mu_);
    return reserved_tokens_;
  }
  int64_t reserved_rows() const {
    std::lock_guard lk(mu_);
    return reserved_rows_;
  }
  int32_t reserved_ctx() const {
    std::lock_guard lk(mu_);
    return reserved_ctx_;
  }

 private:
  static bool prefills(const forward_batch& batch, const std::vector<int32_t>& prompt) {
    for (const auto& s : batch.seqs) {
      if (s.n_past == 0 && std::equal(s.tokens.begin(), s.tokens.end(), prompt.begin(), prompt.end())) return true;
    }
    return false;
  }

  static void invalid(const std::string& what) { throw std::invalid_argument("fake_executor: " + what); }

  // Slot of position pos through a block table; checks the table covers it.
  size_t slot(std::span<const int32_t> table, int64_t pos) const {
    const auto i = static_cast<size_t>(pos / block_size_);
    if (i >= table.size()) invalid("block table does not cover position " + std::to_string(pos));
    const int32_t block = table[i];
    if (block < 0 || block >= n_kv_blocks_) invalid("block id " + std::to_string(block) + " out of range");
    return static_cast<size_t>(block) * static_cast<size_t>(block_size_) + static_cast<size_t>(pos % block_size_);
  }

  struct fake_state {
    uint64_t hash = 1469598103934665603ull;  // FNV-1a of the tokens fed through it
    int64_t n = 0;                           // how many
  };

  // Recurrent mode: checks the slots of the batch and feeds each sequence's new tokens through its own.
  int64_t run_states(const forward_batch& batch) {
    int64_t n_mismatches = 0;
    std::vector<int32_t> used;
    for (const auto& s : batch.seqs) {
      if (states_.empty()) {
        if (s.state_slot != -1) invalid("a state slot without recurrent layers");
        continue;
      }
      if (s.state_slot < 0 || s.state_slot >= n_state_slots()) invalid("state slot " + std::to_string(s.state_slot) + " out of range");
      if (std::find(used.begin(), used.end(), s.state_slot) != used.end()) invalid("two sequences share a state slot");
      if (s.n_logits > 1) invalid("more than one logit row from a recurrent state");
      used.push_back(s.state_slot);
      fake_state& st = states_[static_cast<size_t>(s.state_slot)];
      n_mismatches += st.n != s.n_past;
      for (int32_t t : s.tokens) {
        st.hash ^= static_cast<uint64_t>(static_cast<uint32_t>(t));
        st.hash *= 1099511628211ull;
        ++st.n;
      }
    }
    return n_mismatches;
  }

  // Writes every sequence's new tokens into the KV store, then fills the
  // logit rows from the contexts read back through the block tables.
  void run(const forward_batch& batch, float* logits, float* hidden) {
    int64_t n_state_mismatches = run_states(batch);
    std::vector<size_t> written;
    for (const auto& s : batch.seqs) {
      if (s.tokens.empty() || s.n_past < 0) invalid("empty sequence or negative n_past");
      if (s.n_logits < 0 || s.n_logits > static_cast<int32_t>(s.tokens.size())) invalid("n_logits out of range");
      for (size_t i = 0; i < s.tokens.size(); ++i) {
        const int32_t t = s.tokens[i];
        if (t < 0 || t >= n_vocab_) invalid("token id " + std::to_string(t) + " out of range");
        const size_t at = slot(s.block_table, s.n_past + static_cast<int64_t>(i));
        if (std::find(written.begin(), written.end(), at) != written.end()) invalid("two sequences write one KV slot");
        written.push_back(at);
        kv_[at] = t;
      }
    }
    float* row = logits;
    std::vector<int32_t> context;
    int64_t n_unwritten_reads = 0;
    for (const auto& s : batch.seqs) {
      const int64_t n_total = s.n_past + static_cast<int64_t>(s.tokens.size());
      for (int64_t last = n_total - s.n_logits; last < n_total; ++last) {
        context.clear();
        const int64_t first = kv_window_ > 0 ? std::max<int64_t>(0, last + 1 - kv_window_) : 0;
        for (int64_t pos = first; pos <= last; ++pos) {
          const int32_t t = kv_[slot(s.block_table, pos)];
          if (t < 0) ++n_unwritten_reads;  // warmup's dummy decodes do this on purpose
          context.push_back(t < 0 ? k_unk : t);
        }
        std::fill(row, row + n_vocab_, 0.0f);
        // eos_at_length counts the whole context, read or not.
        const bool eos = eos_at_length_ > 0 && last + 1 == eos_at_length_;
        if (soft_logits_) {
          fake_soft_logits(context, std::span<float>(row, static_cast<size_t>(n_vocab_)));
        } else if (!states_.empty()) {
          // From the state, as a recurrent layer decides; the KV only cross-checks it.
          const fake_state& st = states_[static_cast<size_t>(s.state_slot)];
          const int32_t from_state = k_first_word + static_cast<int32_t>(st.hash % k_n_words);
          n_state_mismatches += kv_window_ == 0 && from_state != fake_next_token(context, 0);
          row[eos ? k_eos : from_state] = 1.0f;
        } else {
          row[eos ? k_eos : fake_next_token(context, 0)] = 1.0f;
        }
        row += n_vocab_;
      }
    }
    for (const auto& s : batch.seqs) {
      if (!s.hidden) continue;
      if (!hidden) invalid("hidden rows without a hidden buffer");
      for (size_t i = 0; i < s.tokens.size(); ++i) {
        const float row[k_fake_n_embd] = {static_cast<float>(s.tokens[i]), static_cast<float>(s.n_past + static_cast<int64_t>(i)), 1.0f, 0.0f};
        hidden = std::copy(row, row + k_fake_n_embd, hidden);
      }
    }
    std::lock_guard lk(mu_);
    n_unwritten_reads_ += n_unwritten_reads;
    n_state_mismatches_ += n_state_mismatches;
  }

  const int32_t n_vocab_, n_kv_blocks_, block_size_, eos_at_length_, kv_window_;
  std::vector<int32_t> kv_;  // token id per KV slot, -1 never written; forward's thread only
  bool soft_logits_ = false;
  bool copy_enabled_ = true;
  std::vector<fake_state> states_;  // recurrent mode's slots; forward's thread (and copy/zero between forwards)
  forward_gate gate_;

  mutable std::mutex mu_;  // guards the members below
  int64_t n_calls_ = 0, n_invalid_batches_ = 0, n_unwritten_reads_ = 0, max_batch_seqs_ = 0;
  int64_t n_blocks_copied_in_ = 0, n_forward_tokens_ = 0;
  int64_t n_state_copies_ = 0, n_state_zeroes_ = 0, n_state_mismatches_ = 0;
  int64_t fail_at_call_ = -1;
  std::optional<std::vector<int32_t>> fail_prompt_;
  int64_t n_reserve_calls_ = 0, reserved_tokens_ = 0, reserved_rows_ = 0;
  int32_t reserved_ctx_ = 0;
};

}  // namespace spate::test_engine
