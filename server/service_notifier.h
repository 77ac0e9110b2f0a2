// systemd integration through libsystemd: sd_notify messages (STATUS=,
// READY=1, WATCHDOG=1, STOPPING=1) and the watchdog interval. Without
// NOTIFY_SOCKET (not under systemd) every call is a cheap no-op.
//
// Thread-safety: all methods may be called from any thread. watchdog() is
// meant for the engine loop's heartbeat, so a wedged engine stops the pings
// (an I/O thread must never call it).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace spate {

class service_notifier {
 public:
  // Reads the watchdog settings once (sd_watchdog_enabled: WATCHDOG_USEC and
  // WATCHDOG_PID of this process).
  service_notifier();

  void status(const std::string& text);
  void ready();
  void stopping();
  void reloading();
  // Sends WATCHDOG=1 at most every interval/2; cheap otherwise.
  void watchdog();

  // Half the systemd watchdog period, in microseconds; 0 when no watchdog.
  int64_t heartbeat_interval_us() const { return interval_us_; }

 private:
  int64_t interval_us_ = 0;
  std::atomic<int64_t> last_ping_us_{0};
};

}  // namespace spate
