#include "util/trace.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <vector>

namespace spate::trace {

namespace detail {
std::atomic<bool> g_enabled{false};
}

namespace {

struct event {
  char name[40];
  const char* cat;
  int64_t ts_ns;
  int64_t dur_ns;
  arg args[k_max_args];
  int n_args;
};

// One thread's spans. The owning thread appends; stop() collects.
struct thread_buffer {
  std::mutex mu;
  std::vector<event> events;
  int64_t n_dropped = 0;
  int64_t session = -1;  // the session the events belong to
  int tid = 0;
  std::string name;
};

struct registry {
  std::mutex mu;
  std::vector<std::shared_ptr<thread_buffer>> buffers;
  int next_tid = 1;
  int64_t session = 0;  // counts sessions; the current one while enabled
  std::string dir;
  bool running = false;
};

registry& reg() {
  static registry r;
  return r;
}

std::atomic<int64_t> g_session{0};

thread_buffer& my_buffer() {
  thread_local std::shared_ptr<thread_buffer> buf;
  if (!buf) {
    buf = std::make_shared<thread_buffer>();
    std::lock_guard lk(reg().mu);
    buf->tid = reg().next_tid++;
    reg().buffers.push_back(buf);
  }
  return *buf;
}

void copy_name(char (&dst)[40], std::string_view s) {
  const size_t n = std::min(s.size(), sizeof(dst) - 1);
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

void append(const event& e) {
  thread_buffer& b = my_buffer();
  const int64_t session = g_session.load(std::memory_order_relaxed);
  std::lock_guard lk(b.mu);
  if (b.session != session) {  // spans of an earlier session were collected or are stale
    b.events.clear();
    b.n_dropped = 0;
    b.session = session;
  }
  if (static_cast<int64_t>(b.events.size()) >= k_max_events_per_thread) {
    ++b.n_dropped;
    return;
  }
  b.events.push_back(e);
}

// JSON string content: names are ASCII identifiers in practice; escape anyway.
void write_escaped(std::FILE* f, std::string_view s) {
  for (char c : s) {
    if (c == '"' || c == '\\') {
      std::fputc('\\', f);
      std::fputc(c, f);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      std::fprintf(f, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
    } else {
      std::fputc(c, f);
    }
  }
}

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void complete(std::string_view name, const char* cat, int64_t ts_ns, int64_t dur_ns, std::initializer_list<arg> args) {
  if (!enabled()) return;
  event e{};
  copy_name(e.name, name);
  e.cat = cat;
  e.ts_ns = ts_ns;
  e.dur_ns = dur_ns;
  for (const arg& a : args) {
    if (e.n_args == k_max_args) break;
    e.args[e.n_args++] = a;
  }
  append(e);
}

void set_thread_name(std::string name) {
  thread_buffer& b = my_buffer();
  std::lock_guard lk(b.mu);
  b.name = std::move(name);
}

void scoped_span::begin(std::string_view name, const char* cat) {
  copy_name(name_, name);
  cat_ = cat;
  t0_ns_ = now_ns();
}

void scoped_span::end() {
  event e{};
  std::memcpy(e.name, name_, sizeof(name_));
  e.cat = cat_;
  e.ts_ns = t0_ns_;
  e.dur_ns = now_ns() - t0_ns_;
  std::copy(args_, args_ + n_args_, e.args);
  e.n_args = n_args_;
  if (enabled()) append(e);
}

std::string start(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return "the profiler directory '" + dir + "' does not exist";
  if (::access(dir.c_str(), W_OK) != 0) return "the profiler directory '" + dir + "' is not writable";
  registry& r = reg();
  std::lock_guard lk(r.mu);
  if (r.running) return "a profile is already being recorded; POST /stop_profile first";
  r.running = true;
  r.dir = dir;
  g_session.store(++r.session, std::memory_order_relaxed);
  detail::g_enabled.store(true, std::memory_order_release);
  return "";
}

session_result stop() {
  registry& r = reg();
  std::vector<std::shared_ptr<thread_buffer>> buffers;
  session_result out;
  int64_t session = 0;
  {
    std::lock_guard lk(r.mu);
    if (!r.running) {
      out.error = "no profile is being recorded; POST /start_profile first";
      return out;
    }
    r.running = false;
    detail::g_enabled.store(false, std::memory_order_release);
    buffers = r.buffers;
    session = r.session;
    out.path = (std::filesystem::path(r.dir) / ("spate-trace-" + std::to_string(::getpid()) + "-" + std::to_string(session) + ".json")).string();
  }
  std::FILE* f = std::fopen(out.path.c_str(), "w");
  if (f == nullptr) {
    out.error = "cannot write " + out.path + ": " + std::strerror(errno);
    return out;
  }
  std::fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
  bool first = true;
  auto sep = [&] {
    if (!first) std::fputs(",\n", f);
    first = false;
  };
  for (const auto& b : buffers) {
    std::vector<event> events;
    std::string name;
    {
      std::lock_guard lk(b->mu);
      if (b->session == session) {
        events.swap(b->events);
        out.n_dropped += b->n_dropped;
        b->n_dropped = 0;
      }
      name = b->name.empty() ? "thread " + std::to_string(b->tid) : b->name;
    }
    if (events.empty()) continue;
    sep();
    std::fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":\"", b->tid);
    write_escaped(f, name);
    std::fputs("\"}}", f);
    sep();
    std::fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%d}}", b->tid, b->tid);
    for (const event& e : events) {
      sep();
      std::fputs("{\"ph\":\"X\",\"pid\":1,\"tid\":", f);
      // Microseconds with three decimals (the format's unit; ns precision).
      std::fprintf(f, "%d,\"ts\":%lld.%03lld,\"dur\":%lld.%03lld,\"cat\":\"", b->tid, static_cast<long long>(e.ts_ns / 1000),
                   static_cast<long long>(e.ts_ns % 1000), static_cast<long long>(e.dur_ns / 1000),
                   static_cast<long long>(e.dur_ns % 1000));
      write_escaped(f, e.cat ? e.cat : "");
      std::fputs("\",\"name\":\"", f);
      write_escaped(f, e.name);
      std::fputs("\",\"args\":{", f);
      for (int i = 0; i < e.n_args; ++i) {
        std::fprintf(f, "%s\"", i ? "," : "");
        write_escaped(f, e.args[i].key);
        std::fprintf(f, "\":%lld", static_cast<long long>(e.args[i].value));
      }
      std::fputs("}}", f);
      ++out.n_events;
    }
  }
  std::fprintf(f, "\n],\"otherData\":{\"producer\":\"spate\",\"dropped_events\":%lld}}\n", static_cast<long long>(out.n_dropped));
  const bool ok = std::ferror(f) == 0;
  if (std::fclose(f) != 0 || !ok) out.error = "writing " + out.path + " failed: " + std::strerror(errno);
  return out;
}

}  // namespace spate::trace
