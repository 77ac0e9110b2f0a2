#include "server/ws_registry.h"

namespace spate {

ws_registry::ticket::~ticket() { r_.leave(late_ ? 0 : id_); }

std::unique_ptr<ws_registry::ticket> ws_registry::enter(std::function<void()> on_drain) {
  std::lock_guard lock(mu_);
  if (draining_) {
    ++n_late_;
    return std::unique_ptr<ticket>(new ticket(*this, 0, true));
  }
  const uint64_t id = next_id_++;
  on_drain_.emplace(id, std::move(on_drain));
  return std::unique_ptr<ticket>(new ticket(*this, id, false));
}

void ws_registry::begin_drain() {
  std::lock_guard lock(mu_);
  if (draining_) return;
  draining_ = true;
  for (auto& [id, fn] : on_drain_) {
    if (fn) fn();
  }
}

int64_t ws_registry::open() const {
  std::lock_guard lock(mu_);
  return static_cast<int64_t>(on_drain_.size()) + n_late_;
}

void ws_registry::leave(uint64_t id) {
  std::lock_guard lock(mu_);
  if (id == 0) {
    --n_late_;
  } else {
    on_drain_.erase(id);
  }
}

}  // namespace spate
