// Failure injection for the hardening tests (issue 13), wired from one hidden
// `spate serve` flag, --debug-fail-forward-at N: the N-th forward pass after
// the server is ready throws, as a kernel or allocation failure would. The
// engine then fails only the requests of that step ("internal error: ...")
// and keeps serving. Not for production use; absent from --help.
//
// Thread-safety: as forward_executor (the engine thread only).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

#include "model/forward_executor.h"

namespace spate::cli {

class fault_injecting_executor final : public forward_executor {
 public:
  // fail_at: 1-based index of the forward pass (counted from arm()) that
  // throws; 0 = never. inner must outlive this executor.
  fault_injecting_executor(forward_executor& inner, int64_t fail_at) : inner_(inner), fail_at_(fail_at) {}

  // Starts counting (after warmup, whose passes do not count). Any thread.
  void arm() { armed_.store(true); }

  int32_t n_vocab() const override { return inner_.n_vocab(); }
  int32_t n_kv_blocks() const override { return inner_.n_kv_blocks(); }
  int32_t block_size() const override { return inner_.block_size(); }
  void reserve(int64_t max_tokens, int64_t max_logit_rows, int32_t max_ctx) override {
    inner_.reserve(max_tokens, max_logit_rows, max_ctx);
  }
  void forward(const forward_batch& batch, float* logits, float* hidden) override;
  int32_t n_embd() const override { return inner_.n_embd(); }
  int32_t kv_window() const override { return inner_.kv_window(); }
  void run_tasks(int64_t n_tasks, const std::function<void(int64_t)>& fn) override { inner_.run_tasks(n_tasks, fn); }
  size_t kv_block_bytes() const override { return inner_.kv_block_bytes(); }
  uint64_t kv_format_id() const override { return inner_.kv_format_id(); }
  void copy_kv_block_out(int32_t block, std::span<uint8_t> out) const override { inner_.copy_kv_block_out(block, out); }
  void copy_kv_block_in(int32_t block, std::span<const uint8_t> in) override { inner_.copy_kv_block_in(block, in); }

 private:
  forward_executor& inner_;
  int64_t fail_at_ = 0;
  int64_t n_forwards_ = 0;
  std::atomic<bool> armed_{false};
};

// Installs the handler of SIGBUS: a mapped model file truncated or rewritten
// in place while the server runs (a package upgrade should rename a new file
// over it instead, which the running server never notices). The handler
// writes one fatal line to stderr (async-signal-safe write(2)) and exits with
// k_exit_sigbus, so systemd's Restart=on-failure starts a fresh server that
// loads the new file. Call once at start-up.
inline constexpr int k_exit_sigbus = 75;
void install_sigbus_handler();

}  // namespace spate::cli
