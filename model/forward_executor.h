// The seam between the serving engine and the model: the engine hands a plain
// forward_batch to a forward_executor and gets logits back. The real one is
// model_executor (weights, KV storage, thread pool); tests of the engine loop
// use a fake that needs no weights.
//
// Thread-safety: an executor is used by one thread at a time (the engine
// thread, or the caller before the engine starts).
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "model/forward_batch.h"

namespace spate {

class forward_executor {
 public:
  virtual ~forward_executor() = default;

  virtual int32_t n_vocab() const = 0;
  // The KV storage: n_kv_blocks() blocks of block_size() token positions each.
  // Block ids in a forward_batch's block tables are in [0, n_kv_blocks()).
  virtual int32_t n_kv_blocks() const = 0;
  virtual int32_t block_size() const = 0;

  // Grows workspaces for steps of up to max_tokens tokens, max_logit_rows
  // logit rows and contexts of up to max_ctx positions (no allocation in
  // steps within these bounds).
  virtual void reserve(int64_t max_tokens, int64_t max_logit_rows, int32_t max_ctx) = 0;

  // Runs the batch: writes the KV of its positions and batch.n_logit_rows()
  // rows of n_vocab() floats to logits, in batch order, and (when the batch
  // has hidden sequences) batch.n_hidden_rows() rows of n_embd() floats to
  // hidden: the final-normed hidden states, in batch order. Throws on an
  // invalid batch (std::invalid_argument) or any failure; the engine then
  // fails the requests of that step and keeps serving.
  virtual void forward(const forward_batch& batch, float* logits, float* hidden) = 0;
  // Width of a hidden-state row (the model's embedding length).
  virtual int32_t n_embd() const = 0;
  // Positions every layer reads back: a query at position p reads KV
  // positions (p - kv_window(), p] only (every layer is sliding-window), so
  // leading blocks wholly before the next query's window may be released and
  // left as k_no_block in the block table. 0: some layer reads the whole
  // context, every block must stay.
  virtual int32_t kv_window() const { return 0; }

  // Copying KV blocks out and in (the prefix cache's disk tier). A block's
  // bytes are kv_block_bytes() bytes: every layer's K and V of its
  // block_size() positions, in an order the executor fixes; copying them out
  // of one executor and into another whose kv_format_id() is equal (same
  // model weights assumed) gives the second exactly the first's KV.
  // kv_block_bytes() 0: the executor cannot copy its KV (the default).
  // kv_format_id(): a hash of everything besides the weights that decides the
  // bytes: KV dtype, block size, layer and head shapes, RoPE settings, kernel
  // level. Both copies: the calling thread, between forward passes;
  // out.size() and in.size() must be kv_block_bytes().
  virtual size_t kv_block_bytes() const { return 0; }
  virtual uint64_t kv_format_id() const { return 0; }
  virtual void copy_kv_block_out(int32_t /*block*/, std::span<uint8_t> /*out*/) const {}
  virtual void copy_kv_block_in(int32_t /*block*/, std::span<const uint8_t> /*in*/) {}

  // Recurrent state (hybrid models: Gated DeltaNet or Mamba layers beside
  // attention). n_state_slots() slots of state_slot_bytes() bytes, each the
  // fixed-size state of every recurrent layer for one sequence; a
  // forward_seq's state_slot must then be a slot in [0, n_state_slots())
  // (distinct within a batch). 0 slots (the default): no recurrent layer,
  // state_slot is -1 everywhere. copy_state: dst = src's state; zero_state:
  // dst = the state before a sequence's first token. Both: the calling
  // thread, between forward passes.
  virtual int32_t n_state_slots() const { return 0; }
  virtual size_t state_slot_bytes() const { return 0; }
  virtual void copy_state(int32_t /*src*/, int32_t /*dst*/) {}
  virtual void zero_state(int32_t /*dst*/) {}

  // Runs fn(task) for every task in [0, n_tasks) on the executor's threads
  // (the engine's per-row work after a forward: masking and sampling), and
  // returns when all have run. Tasks may run concurrently and in any order, so
  // each must touch only its own state; fn must not throw. The default runs
  // them in order on the calling thread.
  virtual void run_tasks(int64_t n_tasks, const std::function<void(int64_t)>& fn) {
    for (int64_t i = 0; i < n_tasks; ++i) fn(i);
  }
};

}  // namespace spate
