#include "server/service_notifier.h"

#include <systemd/sd-daemon.h>

#include <chrono>

namespace spate {

namespace {

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

service_notifier::service_notifier() {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) interval_us_ = static_cast<int64_t>(usec / 2);
}

void service_notifier::status(const std::string& text) { sd_notifyf(0, "STATUS=%s", text.c_str()); }

void service_notifier::ready() { sd_notify(0, "READY=1\nSTATUS=serving"); }

void service_notifier::stopping() { sd_notify(0, "STOPPING=1\nSTATUS=draining"); }

void service_notifier::reloading() { sd_notify(0, "STATUS=reloaded TLS certificate and API keys"); }

void service_notifier::watchdog() {
  if (interval_us_ <= 0) return;
  const int64_t now = now_us();
  int64_t last = last_ping_us_.load(std::memory_order_relaxed);
  // Ping at twice the required rate: at most every interval/2 = period/4.
  if (now - last < interval_us_ / 2) return;
  if (!last_ping_us_.compare_exchange_strong(last, now)) return;
  sd_notify(0, "WATCHDOG=1");
}

}  // namespace spate
