#include "server/idle_connections.h"

#include <utility>

namespace spate {

uint64_t idle_connections::add(closer c) {
  std::lock_guard lk(mu_);
  const uint64_t id = next_id_++;
  waiting_.emplace(id, std::move(c));
  return id;
}

void idle_connections::remove(uint64_t id) {
  std::lock_guard lk(mu_);
  waiting_.erase(id);
}

bool idle_connections::close_oldest() {
  closer c;
  {
    std::lock_guard lk(mu_);
    if (waiting_.empty()) return false;
    c = std::move(waiting_.begin()->second);
    waiting_.erase(waiting_.begin());
  }
  c();
  return true;
}

size_t idle_connections::size() const {
  std::lock_guard lk(mu_);
  return waiting_.size();
}

}  // namespace spate
