// LoRA adapters in llama.cpp's GGUF adapter format, and their application in a
// batched forward pass.
//
// Format: general.type = "adapter", adapter.type = "lora",
// adapter.lora.alpha (float), general.architecture = the base's; per adapted
// weight W ("blk.N.attn_q.weight"), tensors "<W>.lora_a" with GGUF dims
// [n_in, rank] and "<W>.lora_b" with dims [rank, n_out] (F32, F16 or BF16).
// Adapted weights: attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up,
// ffn_down of every layer. As in llama.cpp, the projection becomes
//   y = W x + scale * B (A x),  scale = alpha / rank (1 when alpha is 0).
//
// Batching (Punica / S-LoRA style): the base weights run once for every row
// of the step; then, per adapter present in the step, its rows are gathered
// and its low-rank products run on those rows only. Each row's delta is a
// function of that row's input and its adapter alone (the kernels' per-row
// results do not depend on how many rows share a call), so a request's output
// is the same alone, next to base rows, or next to other adapters' rows.
//
// Thread-safety: a lora_adapter is immutable after loading and shared
// read-only. lora_runner is used by the forward's thread only.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "model/forward_batch.h"
#include "model/thread_pool.h"

namespace spate {

struct model_config;
struct model_weights;
class gguf_file;

enum class lora_target : int8_t { q, k, v, o, gate, up, down };
inline constexpr int k_lora_targets = 7;

// One adapted weight: delta = scale * B (A x).
struct lora_matrix {
  kernels::packed_weight a;  // [rank x n_in]
  std::vector<float> bt;     // B transposed, [rank x n_out] (kernels' lora_expand reads it)
  int64_t n_out = 0;
  float scale = 1.0f;
  // ggml multiplies an F16 (BF16) weight with activations converted to F16 (BF16): so do we,
  // for A's input and for B's (t = A x), so that an adapter's output is llama.cpp's.
  kernels::ggml_type a_act = kernels::ggml_type::f32, b_act = kernels::ggml_type::f32;
  int32_t rank() const { return static_cast<int32_t>(a.n_out()); }
};

struct lora_adapter {
  std::string path;
  float alpha = 0.0f;
  int32_t max_rank = 0;  // the largest rank of its matrices
  size_t bytes = 0;      // packed A and B
  std::vector<std::array<std::unique_ptr<lora_matrix>, k_lora_targets>> layers;  // [n_layer]; null: not adapted
  std::shared_ptr<const gguf_file> file;  // the mapping the scalar level's matrices point into

  const lora_matrix* find(int32_t layer, lora_target t) const {
    return layers[static_cast<size_t>(layer)][static_cast<size_t>(t)].get();
  }
};

// Reads an adapter for the base model (config c, weights w). Throws
// std::runtime_error naming the file and, for a shape mismatch, the tensor
// and both shapes; a rank above max_rank (> 0), a tensor spate cannot adapt,
// a different architecture or a file that is not a LoRA adapter are refused
// the same way.
std::shared_ptr<const lora_adapter> load_lora_adapter(const std::string& path, const model_config& c, const model_weights& w,
                                                      int32_t max_rank, kernels::isa_level level);

// Whether the adapter file fits the base model file by their headers alone
// (nothing is packed): a LoRA adapter of the same architecture whose every
// lora_a/lora_b pair fits the base tensor of that name ([n_in, rank] and
// [rank, n_out]) with rank <= max_rank (> 0). "" or why not, naming the
// tensor. For binding start-time adapters to their base (load_lora_adapter
// checks the loaded weights again).
std::string lora_fits_base(const gguf_file& adapter, const gguf_file& base, int32_t max_rank);

// One projection output an adapter may change: y[row * ldy + col].
struct lora_job {
  lora_target target;
  float* y;
  int64_t ldy;
};

// The adapters of one forward step and the work that applies them.
class lora_runner {
 public:
  explicit lora_runner(thread_pool& pool) : pool_(pool) {}

  // Groups the step's token rows by adapter. slots: the executor's adapter
  // table (forward_seq::adapter indexes it); row t belongs to sequence
  // seq_of_row[t]. Returns whether any row has an adapter.
  bool begin_step(const forward_batch& batch, std::span<const int32_t> seq_of_row,
                  std::span<const std::shared_ptr<const lora_adapter>> slots);
  bool active() const { return !groups_.empty(); }

  // After the projections of layer `layer` that read x [n_rows x ldx]: for
  // every job and every adapter group of the step that adapts the job's
  // target, y[row] += scale * B (A x[row]) on the group's rows.
  void apply(int32_t layer, const float* x, int64_t ldx, std::initializer_list<lora_job> jobs);

 private:
  struct group {
    const lora_adapter* adapter;
    std::vector<int64_t> rows;  // token rows, ascending
  };
  // One (group, job) pair with a matrix, split into tasks of consecutive
  // rows: its workspaces' offsets.
  struct item {
    const group* g;
    const lora_job* job;
    const lora_matrix* m;
    size_t x_off;      // into xg_ (floats): the group's gathered rows, [n_rows x ldx]
    size_t act_off;    // into act_ (bytes): A's activations
    size_t t_off;      // into t_ (floats): A x, [n_rows x rank]
    int64_t rows_per_task;
    int64_t first_task;
  };

  thread_pool& pool_;
  std::vector<group> groups_;
  std::vector<item> items_;
  std::vector<float> xg_, t_;
  std::vector<uint8_t> act_;
};

}  // namespace spate
