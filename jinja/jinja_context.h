// Per-render state of the Jinja renderer: resource limits and their counters, the pinned
// clock, variable scopes (frames), and the bookkeeping that frees reference cycles a template
// can build (a namespace holding itself, a macro stored in the scope it closes over) when the
// render ends. One render_context per render() call; not shared between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/jinja_value.h"

namespace spate::jinja {

// Limits enforced on every render; exceeding one throws limit_error.
struct render_limits {
  std::size_t max_output_bytes = 16u << 20;      // rendered text
  std::size_t max_string_bytes = 16u << 20;      // any single string value
  std::uint64_t max_built_bytes = 128ull << 20;  // total bytes of strings and lists built
  std::uint64_t max_steps = 5'000'000;           // statements + loop iterations + calls
  int max_call_depth = 64;                       // nested macro calls
  std::size_t max_stack_bytes = 1u << 20;        // native stack used by the evaluator
};

// A variable scope: the template's top level, one loop iteration, a macro call, a with /
// filter / set block body. Lookups walk the parent chain.
struct frame {
  std::shared_ptr<frame> parent;
  std::vector<std::pair<std::string, value>> vars;
  bool tracked = false;
  value* find_local(std::string_view name);
  void set(std::string_view name, value v);
};

class render_context {
 public:
  render_context(const render_limits& limits, std::int64_t now_unix_s) : limits_(limits), now_unix_s_(now_unix_s) {}
  ~render_context();
  render_context(const render_context&) = delete;
  render_context& operator=(const render_context&) = delete;

  const render_limits& limits() const { return limits_; }
  std::int64_t now_unix_s() const { return now_unix_s_; }  // -1: real time

  // Counts one unit of work (loop iteration, call, generator pull).
  void step();
  // Accounts for `bytes` of newly built strings / list storage.
  void charge(std::size_t bytes);
  // Throws when a string of `bytes` would exceed the single-string limit.
  void check_string(std::size_t bytes) const;

  // Objects that may be part of reference cycles; kept until the render ends, then cleared.
  // Each counts against max_built_bytes.
  void track(const std::shared_ptr<ns_obj>& ns);
  void track(const std::shared_ptr<frame>& f);
  void track(const std::shared_ptr<loop_obj>& l);

  int line = 0;                              // template line being evaluated, for error messages
  int call_depth = 0;                        // nested macro calls
  int repr_depth = 0;                        // nested repr()/str() of containers
  std::vector<const ns_obj*> ns_repr_stack;  // namespaces being printed (recursion shows {...})

 private:
  const render_limits& limits_;
  std::int64_t now_unix_s_;
  std::uint64_t steps_ = 0;
  std::uint64_t built_ = 0;
  std::vector<std::shared_ptr<ns_obj>> namespaces_;
  std::vector<std::shared_ptr<frame>> frames_;
  std::vector<std::shared_ptr<loop_obj>> loops_;
};

}  // namespace spate::jinja
