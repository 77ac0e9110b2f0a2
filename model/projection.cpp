#include "model/projection.h"

#include <algorithm>

namespace spate {

void projector::quantize(const kernels::packed_weight& w, const float* x, int64_t ldx, int64_t n_rows,
                         row_prologue pro) {
  // Chunks of rows; the activation format is per row, so any split gives the same bytes.
  const int64_t rows_per_task = std::max<int64_t>(1, n_rows / (4 * pool_.n_threads()));
  const int64_t n_tasks = (n_rows + rows_per_task - 1) / rows_per_task;
  uint8_t* act = act_.data();
  pool_.parallel_for(n_tasks, [&](int64_t t, int) {
    const int64_t r0 = t * rows_per_task;
    const int64_t r1 = std::min(n_rows, r0 + rows_per_task);
    if (pro.fn != nullptr) pro.fn(pro.ctx, r0, r1);
    kernels::quantize_act(w, x, ldx, r0, r1, act);
  });
}

void projector::project(const float* x, int64_t ldx, int64_t n_rows, std::initializer_list<mm_job> jobs,
                        row_prologue pro) {
  // Weights that share an activation format share one quantized copy of x
  // (e.g. Q/K/V of the same type); a mixed-type file (Q4_K_M) gets one per format.
  mm_job group[4];
  bool done[4] = {false, false, false, false};
  const mm_job* all = jobs.begin();
  const int n_jobs = static_cast<int>(jobs.size());
  for (int i = 0; i < n_jobs; ++i) {
    if (done[i]) continue;
    int n_group = 0;
    const int fmt = kernels::act_format_id(*all[i].w);
    for (int j = i; j < n_jobs; ++j) {
      if (!done[j] && kernels::act_format_id(*all[j].w) == fmt && all[j].w->n_in() == all[i].w->n_in()) {
        group[n_group++] = all[j];
        done[j] = true;
      }
    }
    quantize(*all[i].w, x, ldx, n_rows, pro);
    pro = {};  // the rows are ready for the next format's quantization
    matmuls(group, n_group, n_rows);
  }
}

int64_t projector::target_matmul_tasks(const mm_job* jobs, int n_jobs, int64_t n_rows) const {
  const int64_t n_threads = pool_.n_threads();
  if (n_rows > k_stream_max_rows) return 8 * n_threads;  // compute-bound: many tasks balance the threads
  int64_t bytes = 0;
  for (int i = 0; i < n_jobs; ++i) {
    const auto traits = kernels::traits_of(static_cast<uint32_t>(jobs[i].w->type()));
    bytes += traits ? jobs[i].w->n_out() * kernels::row_bytes(*traits, jobs[i].w->n_in()) : 0;
  }
  const int64_t by_bytes = bytes / k_min_stream_task_bytes;
  const int64_t per_thread = std::clamp<int64_t>((by_bytes + n_threads - 1) / n_threads, 1, 8);
  return per_thread * n_threads;
}

void projector::matmuls(const mm_job* jobs, int n_jobs, int64_t n_rows) {
  // Split every weight's output columns into chunks (multiples of its granularity),
  // enough chunks for load balance; all chunks of all jobs form one parallel loop.
  struct chunk_plan {
    const mm_job* job;
    int64_t chunk;
    int64_t n_chunks;
  };
  chunk_plan plans[4];
  int64_t total = 0;
  int64_t total_out = 0;
  for (int i = 0; i < n_jobs; ++i) total_out += jobs[i].w->n_out();
  const int64_t target_tasks = target_matmul_tasks(jobs, n_jobs, n_rows);
  for (int i = 0; i < n_jobs; ++i) {
    const mm_job& j = jobs[i];
    const int64_t g = kernels::col_granularity(*j.w);
    const int64_t m = kernels::col_split_multiple(*j.w, n_rows);
    const int64_t n_out = j.w->n_out();
    const int64_t want = std::max<int64_t>(1, target_tasks * n_out / std::max<int64_t>(1, total_out));
    int64_t chunk = (n_out + want - 1) / want;
    // At the kernel's fastest multiple m, the nearest one (576 columns in 16 tasks: 18 chunks
    // of 32, not 15 of 40 whose last group runs alone); otherwise rounded up to g.
    chunk = m > g ? std::max(m, (chunk + m / 2) / m * m) : std::max(g, (chunk + g - 1) / g * g);
    const int64_t n_chunks = (n_out + chunk - 1) / chunk;
    plans[i] = {&j, chunk, n_chunks};
    total += n_chunks;
  }
  const void* act = act_.data();
  pool_.parallel_for(total, [&](int64_t t, int) {
    int p = 0;
    while (t >= plans[p].n_chunks) t -= plans[p++].n_chunks;
    const chunk_plan& pl = plans[p];
    const int64_t c0 = t * pl.chunk;
    const int64_t c1 = std::min(pl.job->w->n_out(), c0 + pl.chunk);
    kernels::matmul(*pl.job->w, act, n_rows, pl.job->y, pl.job->ldy, c0, c1);
  });
}

}  // namespace spate
