// The plain data a model runner consumes: which sequences run in this step,
// which new tokens each brings, where its KV lives, and which logits to return.
// Built by the scheduler (scheduler_output::to_batch), warmup or tests; never
// holds ownership.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace spate {

struct forward_seq {
  std::span<const int32_t> tokens;       // new tokens of this step, at positions [n_past, n_past + tokens.size())
  int32_t n_past = 0;                    // positions already in the KV cache for this sequence
  std::span<const int32_t> block_table;  // block ids; must cover n_past + tokens.size() positions
  int32_t n_logits = 1;                  // return logits for the last n_logits new tokens (0..tokens.size())
  bool hidden = false;                   // return the final-normed hidden state of every new token (embeddings)
  int32_t adapter = -1;                  // the executor's LoRA adapter slot (model/lora.h); -1: the base model
  int32_t state_slot = -1;               // recurrent models: the slot holding its state after n_past positions,
                                         // left holding the state after its new tokens (forward_executor); -1: none
};

struct forward_batch {
  std::vector<forward_seq> seqs;

  int64_t n_tokens() const {
    int64_t n = 0;
    for (const auto& s : seqs) n += static_cast<int64_t>(s.tokens.size());
    return n;
  }
  int64_t n_logit_rows() const {
    int64_t n = 0;
    for (const auto& s : seqs) n += s.n_logits;
    return n;
  }
  int64_t n_hidden_rows() const {
    int64_t n = 0;
    for (const auto& s : seqs) n += s.hidden ? static_cast<int64_t>(s.tokens.size()) : 0;
    return n;
  }
};

}  // namespace spate
