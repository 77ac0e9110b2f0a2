// The step profiler's recorder: complete-duration spans ("ph": "X") written as
// a Chrome trace-event JSON file that Perfetto and chrome://tracing open.
//
// One process-wide session at a time: start() begins recording, stop() ends
// it and writes the file. While no session runs, a span costs one relaxed
// atomic load (enabled()) and records nothing.
//
// Threads: any thread may record. Each thread appends to its own buffer (its
// own mutex, uncontended except while stop() collects), so the executor's
// workers show as their own tracks, named by set_thread_name().
//
// Bounds: at most k_max_events_per_thread spans per thread and session; more
// are counted as dropped (reported by stop() and in the file's otherData).
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace spate::trace {

inline constexpr int64_t k_max_events_per_thread = 1 << 18;
inline constexpr int k_max_args = 6;

namespace detail {
extern std::atomic<bool> g_enabled;
}

// True while a session records. Any thread; relaxed.
inline bool enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }

// Nanoseconds on the steady clock (the traces' time base). The file writes
// microseconds with three decimals, so spans that touch stay apart.
int64_t now_ns();

struct arg {
  const char* key;  // static storage
  int64_t value;
};

// Records one span of [ts_ns, ts_ns + dur_ns) on the calling thread. name is
// copied (at most 39 bytes kept); cat and arg keys must be static strings.
// Does nothing unless enabled().
void complete(std::string_view name, const char* cat, int64_t ts_ns, int64_t dur_ns, std::initializer_list<arg> args = {});

// Names the calling thread's track ("engine", "worker 1"). Cheap; call once
// when the thread starts. Unnamed threads show as "thread N".
void set_thread_name(std::string name);

// Starts a session writing under dir. Returns "" or why not (one is running;
// dir is not a writable directory). Any thread.
std::string start(const std::string& dir);

struct session_result {
  std::string path;       // the trace file written
  int64_t n_events = 0;   // spans written
  int64_t n_dropped = 0;  // spans over the per-thread bound
  std::string error;      // "" or why nothing was written (no session; I/O error)
};

// Ends the session and writes <dir>/spate-trace-<pid>-<n>.json. Blocks while
// it writes (a few MB per second of recording). Any thread.
session_result stop();

// A span from construction to destruction on the calling thread, recorded
// when a session ran at construction. Arguments may be added meanwhile.
class scoped_span {
 public:
  scoped_span(std::string_view name, const char* cat) : on_(enabled()) {
    if (on_) begin(name, cat);
  }
  ~scoped_span() {
    if (on_) end();
  }
  scoped_span(const scoped_span&) = delete;
  scoped_span& operator=(const scoped_span&) = delete;
  // Adds an argument (up to k_max_args; more are ignored).
  void add(const char* key, int64_t value) {
    if (on_ && n_args_ < k_max_args) args_[n_args_++] = {key, value};
  }

 private:
  void begin(std::string_view name, const char* cat);
  void end();
  bool on_;
  char name_[40] = {};
  const char* cat_ = nullptr;
  int64_t t0_ns_ = 0;
  arg args_[k_max_args] = {};
  int n_args_ = 0;
};

}  // namespace spate::trace
