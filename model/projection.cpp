#include "model/projection.h"

#include <algorithm>
#include <cmath>

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

int64_t projector::chunk_cols(const kernels::packed_weight& w, int64_t n_rows, int64_t want) {
  const int64_t g = kernels::col_granularity(w);
  const int64_t m = kernels::col_split_multiple(w, n_rows);
  const int64_t chunk = (w.n_out() + want - 1) / want;
  // At the kernel's fastest multiple m, the nearest one (576 columns in 16 tasks: 18 chunks
  // of 32, not 15 of 40 whose last group runs alone); otherwise rounded up to g.
  return m > g ? std::max(m, (chunk + m / 2) / m * m) : std::max(g, (chunk + g - 1) / g * g);
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
    const int64_t n_out = j.w->n_out();
    const int64_t want = std::max<int64_t>(1, target_tasks * n_out / std::max<int64_t>(1, total_out));
    const int64_t chunk = chunk_cols(*j.w, n_rows, want);
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

namespace spate {

void projector::project_grouped(const float* x, int64_t ldx, int64_t n_rows, const std::vector<grouped_job>& jobs,
                                row_prologue pro) {
  // At most two activation formats (f32 rows, q8 blocks); each is quantized
  // once for all rows, then its jobs run.
  bool seen[2] = {false, false};
  for (const grouped_job& j : jobs) {
    if (j.n_rows > 0) seen[kernels::act_format_id(*j.w)] = true;
  }
  for (int fmt = 0; fmt < 2; ++fmt) {
    if (!seen[fmt]) continue;
    const kernels::packed_weight* first = nullptr;
    for (const grouped_job& j : jobs) {
      if (j.n_rows > 0 && kernels::act_format_id(*j.w) == fmt) {
        first = j.w;
        break;
      }
    }
    quantize(*first, x, ldx, n_rows, pro);
    pro = {};
    grouped_matmuls(jobs, fmt, first->n_in());
  }
}

void projector::grouped_matmuls(const std::vector<grouped_job>& jobs, int fmt, int64_t n_in) {
  // Target tasks as for one projection (streaming steps: by the bytes read;
  // wide steps: 8 per thread), shared among the jobs by their cost, the
  // weight bytes times the rows plus a fixed share for the stream's start.
  const int64_t n_threads = pool_.n_threads();
  double total_cost = 0.0;
  int64_t total_bytes = 0, max_rows = 0;
  for (const grouped_job& j : jobs) {
    if (j.n_rows == 0 || kernels::act_format_id(*j.w) != fmt) continue;
    const int64_t bytes = j.w->n_out() * kernels::row_bytes(*kernels::traits_of(static_cast<uint32_t>(j.w->type())), n_in);
    total_bytes += bytes;
    total_cost += static_cast<double>(bytes) * static_cast<double>(8 + j.n_rows);
    max_rows = std::max(max_rows, j.n_rows);
  }
  int64_t target = 8 * n_threads;
  if (max_rows <= k_stream_max_rows) {
    target = std::clamp<int64_t>((total_bytes / k_min_stream_task_bytes + n_threads - 1) / n_threads, 1, 8) * n_threads;
  }
  grouped_plans_.clear();
  int64_t n_tasks = 0;
  for (const grouped_job& j : jobs) {
    if (j.n_rows == 0 || kernels::act_format_id(*j.w) != fmt) continue;
    const int64_t bytes = j.w->n_out() * kernels::row_bytes(*kernels::traits_of(static_cast<uint32_t>(j.w->type())), n_in);
    const double share = static_cast<double>(bytes) * static_cast<double>(8 + j.n_rows) / total_cost;
    const int64_t want = std::max<int64_t>(1, std::llround(static_cast<double>(target) * share));
    const int64_t chunk = chunk_cols(*j.w, j.n_rows, want);
    grouped_plans_.push_back({&j, chunk, n_tasks});
    n_tasks += (j.w->n_out() + chunk - 1) / chunk;
  }
  const size_t row_bytes = kernels::act_bytes(*grouped_plans_.front().job->w, 1);
  const uint8_t* act = act_.data();
  pool_.parallel_for(n_tasks, [&](int64_t t, int) {
    auto it = std::upper_bound(grouped_plans_.begin(), grouped_plans_.end(), t,
                               [](int64_t v, const grouped_plan& p) { return v < p.first_task; });
    const grouped_plan& p = *(it - 1);
    const grouped_job& j = *p.job;
    const int64_t c0 = (t - p.first_task) * p.chunk;
    const int64_t c1 = std::min(j.w->n_out(), c0 + p.chunk);
    kernels::matmul(*j.w, act + static_cast<size_t>(j.row0) * row_bytes, j.n_rows, j.y + j.row0 * j.ldy, j.ldy, c0, c1);
  });
}

}  // namespace spate
