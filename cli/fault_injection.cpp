#include "cli/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

namespace spate::cli {

void fault_injecting_executor::forward(const forward_batch& batch, float* logits, float* hidden) {
  if (armed_ && fail_at_ > 0 && ++n_forwards_ == fail_at_) {
    throw std::runtime_error("injected forward failure (--debug-fail-forward-at " + std::to_string(fail_at_) + ")");
  }
  inner_.forward(batch, logits, hidden);
}

namespace {

void on_sigbus(int) {
  static const char msg[] =
      "spate: fatal: SIGBUS reading a memory-mapped file: the model file was truncated or rewritten in place while "
      "the server was running; exiting (replace model files by renaming a new file over them)\n";
  // Only async-signal-safe calls here.
  ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)ignored;
  ::_exit(k_exit_sigbus);
}

}  // namespace

void install_sigbus_handler() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigbus;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, nullptr);
}

}  // namespace spate::cli
