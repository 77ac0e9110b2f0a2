// Batched projections y = x . W^T on the thread pool: the activation rows are
// quantized once per activation format, then every weight's output columns
// are split into chunks that run as one parallel loop.
//
// Chunking never changes an output's value: a column's dot product is whole,
// and the activation format is per row, so any split gives the same bytes.
//
// Thread-safety: not thread-safe; the forward's calling thread only (it owns
// the activation buffer and drives the pool).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "kernels/matmul.h"
#include "model/thread_pool.h"

namespace spate {

// Per-row work fused into a projection's quantize loop (norms, residual adds,
// the FFN activation): fn(ctx, r0, r1) runs on rows [r0, r1) right before the
// task quantizes them, so those ops cost no parallel loop of their own. It must
// only read and write rows [r0, r1) of the step's row-major buffers.
struct row_prologue {
  void (*fn)(void* ctx, int64_t r0, int64_t r1) = nullptr;
  void* ctx = nullptr;
};

// A row_prologue calling f(r0, r1); f must outlive the projection.
template <class F>
row_prologue prologue_of(F& f) {
  return {[](void* c, int64_t r0, int64_t r1) { (*static_cast<F*>(c))(r0, r1); }, &f};
}

// One weight of a projection: y[row * ldy + col] = (x . w^T)[row][col].
struct mm_job {
  const kernels::packed_weight* w;
  float* y;
  int64_t ldy;
};

// One group of a grouped projection: rows [row0, row0 + n_rows) of x times w,
// into y[(row0 + r) * ldy + col]. A group with n_rows == 0 is skipped.
struct grouped_job {
  const kernels::packed_weight* w;
  int64_t row0;
  int64_t n_rows;
  float* y;
  int64_t ldy;
};

class projector {
 public:
  explicit projector(thread_pool& pool) : pool_(pool) {}

  // Grows the activation buffer to at least n_bytes (kernels::act_bytes of
  // the widest weight and step); projections within it allocate nothing.
  void reserve(size_t n_bytes) {
    if (act_.size() < n_bytes) act_.resize(n_bytes);
  }

  // Runs pro (if any) on every row of x [n_rows x ldx], quantizes x once per
  // activation format and runs the jobs (at most 4, all reading x).
  // Precondition: reserve() covered n_rows rows of every job's weight.
  void project(const float* x, int64_t ldx, int64_t n_rows, std::initializer_list<mm_job> jobs,
               row_prologue pro = {});

  // Runs pro (if any) on every row of x [n_rows x ldx], quantizes the rows
  // once per activation format among the jobs, and runs every job's column
  // chunks as one parallel loop per format: the experts of a mixture-of-
  // experts layer, each weight read once for all its rows. Every job's n_in
  // is ldx's row width. Precondition: reserve() covered n_rows rows.
  void project_grouped(const float* x, int64_t ldx, int64_t n_rows, const std::vector<grouped_job>& jobs,
                       row_prologue pro = {});

 private:
  void quantize(const kernels::packed_weight& w, const float* x, int64_t ldx, int64_t n_rows, row_prologue pro);
  void matmuls(const mm_job* jobs, int n_jobs, int64_t n_rows);
  // Tasks of one matmul loop, a multiple of the thread count. Steps of at most
  // k_stream_max_rows rows stream the weights from memory: every task start
  // costs a claim and a cold prefetch stream, so a task reads at least
  // k_min_stream_task_bytes of weights (SmolLM2 tg128 on Zen 4, interleaved
  // runs: 16 tasks per matmul 271 tok/s, 4 per thread 295, 2 per thread 314).
  // That holds up to 32 rows (Zen 5, spate_bench bd16, 6 alternating rounds:
  // SmolLM2 2009-2404 -> 2298-2724 tok/s with 8 rows as the bound; Gemma 3
  // 270M 1171-1389 -> 1318-1413; the 1B shape, whose matmuls give 8 tasks per
  // thread either way, unchanged). Wider steps are compute-bound and get 8
  // tasks per thread for balance.
  int64_t target_matmul_tasks(const mm_job* jobs, int n_jobs, int64_t n_rows) const;
  static constexpr int64_t k_stream_max_rows = 32;
  static constexpr int64_t k_min_stream_task_bytes = 256 * 1024;

  // Chunk width (columns) of w for matmuls of n_rows rows split into about `want` chunks.
  static int64_t chunk_cols(const kernels::packed_weight& w, int64_t n_rows, int64_t want);
  void grouped_matmuls(const std::vector<grouped_job>& jobs, int fmt, int64_t n_in);

  thread_pool& pool_;
  std::vector<uint8_t> act_;  // quantized activations
  struct grouped_plan {
    const grouped_job* job;
    int64_t chunk;
    int64_t first_task;  // tasks [first_task, first_task + n_chunks) are this job's chunks
  };
  std::vector<grouped_plan> grouped_plans_;  // project_grouped's plan, reused across steps
};

}  // namespace spate
