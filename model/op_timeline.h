// Profiler marks of one forward pass (util/trace.h): consecutive op spans on
// the calling (engine) thread, each ending where the next begins, inside
// layer-group spans; the thread pool's worker tracks get the same op names.
// While no profile is recorded, mark() is one relaxed load.
//
// Not thread-safe: the forward's calling thread only. Names are static strings.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "model/thread_pool.h"
#include "util/trace.h"

namespace spate {

class op_timeline {
 public:
  // Layers are grouped so that a forward shows at most k_max_groups groups.
  static constexpr int32_t k_max_groups = 8;

  op_timeline(thread_pool& pool, int32_t n_layer)
      : pool_(pool), on_(trace::enabled()), group_size_(std::max<int32_t>(1, (n_layer + k_max_groups - 1) / k_max_groups)),
        n_layer_(n_layer) {}
  ~op_timeline() { end_group(); }
  op_timeline(const op_timeline&) = delete;
  op_timeline& operator=(const op_timeline&) = delete;

  // Ends the running op span and starts `kind`'s.
  void mark(const char* kind) {
    if (!on_) return;
    end_op();
    op_ = kind;
    op_t0_ns_ = trace::now_ns();
    pool_.set_trace_label(kind);
  }
  // Layer l begins: opens the next layer group's span at its first layer.
  void layer(int32_t l) {
    if (!on_ || l % group_size_ != 0) return;
    end_group();
    group_first_ = l;
    group_t0_ns_ = trace::now_ns();
  }
  // The layers are done: closes the running op and group spans.
  void end_layers() { end_group(); }

 private:
  void end_op() {
    if (op_ == nullptr) return;
    trace::complete(op_, "op", op_t0_ns_, trace::now_ns() - op_t0_ns_);
    op_ = nullptr;
  }
  void end_group() {
    end_op();
    if (!on_ || group_first_ < 0) return;
    const int32_t last = std::min(group_first_ + group_size_, n_layer_) - 1;
    trace::complete("layers " + std::to_string(group_first_) + "-" + std::to_string(last), "layers", group_t0_ns_,
                    trace::now_ns() - group_t0_ns_, {{"first_layer", group_first_}, {"last_layer", last}});
    group_first_ = -1;
  }

  thread_pool& pool_;
  bool on_;
  int32_t group_size_;
  int32_t n_layer_;
  const char* op_ = nullptr;
  int64_t op_t0_ns_ = 0;
  int32_t group_first_ = -1;
  int64_t group_t0_ns_ = 0;
};

}  // namespace spate
