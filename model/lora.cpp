#include "model/lora.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "kernels/fp16.h"
#include "kernels/ops.h"
#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace spate {

namespace {

struct target_name {
  const char* name;  // the weight's name within a layer
  lora_target target;
};
constexpr target_name k_targets[] = {{"attn_q", lora_target::q},     {"attn_k", lora_target::k},   {"attn_v", lora_target::v},
                                     {"attn_output", lora_target::o}, {"ffn_gate", lora_target::gate}, {"ffn_up", lora_target::up},
                                     {"ffn_down", lora_target::down}};

const kernels::packed_weight& base_of(const layer_weights& L, lora_target t) {
  switch (t) {
    case lora_target::q: return L.wq;
    case lora_target::k: return L.wk;
    case lora_target::v: return L.wv;
    case lora_target::o: return L.wo;
    case lora_target::gate: return L.w_gate;
    case lora_target::up: return L.w_up;
    case lora_target::down: return L.w_down;
  }
  return L.wq;
}

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// "blk.N.NAME.weight.lora_a|b" -> layer N, the target, whether a. False when the name is another tensor.
bool parse_name(const std::string& name, int32_t& layer, lora_target& t, bool& is_a, const std::string& where) {
  const bool a = name.ends_with(".weight.lora_a"), b = name.ends_with(".weight.lora_b");
  if (!a && !b) return false;
  const std::string weight = name.substr(0, name.size() - std::strlen(".lora_a"));
  if (!weight.starts_with("blk.")) throw std::runtime_error(where + "tensor '" + weight + "' cannot be adapted (spate adapts the layers' attention and FFN projections)");
  const size_t dot = weight.find('.', 4);
  const std::string base = weight.substr(dot + 1, weight.size() - dot - 1 - std::strlen(".weight"));
  try {
    layer = std::stoi(weight.substr(4, dot - 4));
  } catch (const std::exception&) {
    throw std::runtime_error(where + "tensor '" + name + "' has no layer number");
  }
  for (const auto& tn : k_targets) {
    if (base == tn.name) {
      t = tn.target;
      is_a = a;
      return true;
    }
  }
  throw std::runtime_error(where + "tensor '" + weight + "' cannot be adapted (spate adapts attn_q, attn_k, attn_v, attn_output, "
                           "ffn_gate, ffn_up and ffn_down)");
}

// B (GGUF dims [rank, n_out]: n_out rows of rank values) as floats, transposed to [rank x n_out].
std::vector<float> transposed_b(const gguf_tensor_info& tb, int64_t rank, int64_t n_out) {
  std::vector<float> bt(static_cast<size_t>(rank * n_out));
  const auto type = static_cast<kernels::ggml_type>(tb.type);
  for (int64_t c = 0; c < n_out; ++c) {
    for (int64_t j = 0; j < rank; ++j) {
      const int64_t i = c * rank + j;
      float v = 0.0f;
      if (type == kernels::ggml_type::f32) {
        std::memcpy(&v, tb.data + i * 4, 4);
      } else {
        uint16_t h = 0;
        std::memcpy(&h, tb.data + i * 2, 2);
        v = type == kernels::ggml_type::f16 ? kernels::fp16_to_f32(h) : kernels::bf16_to_f32(h);
      }
      bt[static_cast<size_t>(j * n_out + c)] = v;
    }
  }
  return bt;
}

// x rounded as ggml converts a weight's f32 activations to its type's (F16, BF16; F32: unchanged).
void round_like(kernels::ggml_type t, float* x, int64_t n) {
  if (t == kernels::ggml_type::f16) {
    for (int64_t i = 0; i < n; ++i) x[i] = kernels::fp16_to_f32(kernels::f32_to_fp16(x[i]));
  } else if (t == kernels::ggml_type::bf16) {
    for (int64_t i = 0; i < n; ++i) x[i] = kernels::bf16_to_f32(kernels::f32_to_bf16(x[i]));
  }
}

}  // namespace

std::string lora_fits_base(const gguf_file& adapter, const gguf_file& base, int32_t max_rank) {
  if (adapter.get_string("general.type").value_or("") != "adapter" || adapter.get_string("adapter.type").value_or("") != "lora")
    return "not a LoRA adapter (general.type must be 'adapter' and adapter.type 'lora')";
  const std::string arch = adapter.get_string("general.architecture").value_or("");
  const std::string base_arch = base.get_string("general.architecture").value_or("");
  if (arch != base_arch) return "its architecture '" + arch + "' is not the base model's '" + base_arch + "'";
  for (const gguf_tensor_info& ta : adapter.tensors()) {
    if (!ta.name.ends_with(".weight.lora_a")) continue;
    const std::string wname = ta.name.substr(0, ta.name.size() - std::strlen(".lora_a"));
    const gguf_tensor_info* tb = adapter.find_tensor(wname + ".lora_b");
    const gguf_tensor_info* w = base.find_tensor(wname);
    if (!tb) return "'" + wname + "' has lora_a but no lora_b";
    if (!w) return "'" + wname + "': the base model has no such weight";
    if (ta.dims.size() != 2 || tb->dims.size() != 2 || w->dims.size() != 2 || ta.dims[0] != w->dims[0] || tb->dims[1] != w->dims[1] ||
        ta.dims[1] != tb->dims[0]) {
      return "'" + wname + "' has lora_a " + dims_text(ta.dims) + " and lora_b " + dims_text(tb->dims) + ", which do not fit the base weight " +
             dims_text(w->dims);
    }
    if (max_rank > 0 && ta.dims[1] > max_rank)
      return "'" + wname + "' has rank " + std::to_string(ta.dims[1]) + ", above --max-lora-rank " + std::to_string(max_rank);
  }
  return "";
}

std::shared_ptr<const lora_adapter> load_lora_adapter(const std::string& path, const model_config& c, const model_weights& w,
                                                      int32_t max_rank, kernels::isa_level level) {
  const std::string where = "LoRA adapter " + path + ": ";
  std::shared_ptr<const gguf_file> f;
  try {
    f = gguf_file::open(path);
  } catch (const std::exception& e) {
    throw std::runtime_error(where + e.what());
  }
  if (f->get_string("general.type").value_or("") != "adapter" || f->get_string("adapter.type").value_or("") != "lora")
    throw std::runtime_error(where + "not a LoRA adapter (general.type must be 'adapter' and adapter.type 'lora')");
  const std::string arch = f->get_string("general.architecture").value_or("");
  if (arch != c.arch) throw std::runtime_error(where + "its architecture '" + arch + "' is not the base model's '" + c.arch + "'");
  auto ad = std::make_shared<lora_adapter>();
  ad->path = path;
  ad->file = f;
  ad->alpha = static_cast<float>(f->get_float("adapter.lora.alpha").value_or(0.0));
  ad->layers.resize(static_cast<size_t>(c.n_layer));
  // Pairs by weight: [layer][target] -> (a, b).
  std::vector<std::array<std::pair<const gguf_tensor_info*, const gguf_tensor_info*>, k_lora_targets>> pairs(
      static_cast<size_t>(c.n_layer));
  for (const gguf_tensor_info& ti : f->tensors()) {
    int32_t layer = 0;
    lora_target t{};
    bool is_a = false;
    if (!parse_name(ti.name, layer, t, is_a, where)) throw std::runtime_error(where + "unexpected tensor '" + ti.name + "'");
    if (layer < 0 || layer >= c.n_layer)
      throw std::runtime_error(where + "tensor '" + ti.name + "': the base model has " + std::to_string(c.n_layer) + " layers");
    auto& p = pairs[static_cast<size_t>(layer)][static_cast<size_t>(t)];
    (is_a ? p.first : p.second) = &ti;
  }
  for (int32_t l = 0; l < c.n_layer; ++l) {
    for (const auto& tn : k_targets) {
      const auto [ta, tb] = pairs[static_cast<size_t>(l)][static_cast<size_t>(tn.target)];
      if (!ta && !tb) continue;
      const std::string wname = "blk." + std::to_string(l) + "." + tn.name + ".weight";
      if (!ta || !tb) throw std::runtime_error(where + "'" + wname + "' has lora_" + (ta ? "a" : "b") + " but no lora_" + (ta ? "b" : "a"));
      const kernels::packed_weight& base = base_of(w.layers[static_cast<size_t>(l)], tn.target);
      if (base.n_out() == 0)
        throw std::runtime_error(where + "'" + wname + "': the base model has no such weight");
      if (ta->dims.size() != 2 || tb->dims.size() != 2 || ta->dims[0] != base.n_in() || tb->dims[1] != base.n_out() ||
          ta->dims[1] != tb->dims[0]) {
        throw std::runtime_error(where + "'" + wname + "' has lora_a " + dims_text(ta->dims) + " and lora_b " + dims_text(tb->dims) +
                                 ", which do not fit the base weight [" + std::to_string(base.n_in()) + ", " +
                                 std::to_string(base.n_out()) + "] (lora_a must be [n_in, rank], lora_b [rank, n_out])");
      }
      const int64_t rank = ta->dims[1];
      if (rank < 1 || (max_rank > 0 && rank > max_rank))
        throw std::runtime_error(where + "'" + wname + "' has rank " + std::to_string(rank) + ", above --max-lora-rank " +
                                 std::to_string(max_rank));
      for (const gguf_tensor_info* ti : {ta, tb}) {
        const auto type = static_cast<kernels::ggml_type>(ti->type);
        if (type != kernels::ggml_type::f32 && type != kernels::ggml_type::f16 && type != kernels::ggml_type::bf16)
          throw std::runtime_error(where + "'" + ti->name + "' is of type " + std::to_string(ti->type) + "; LoRA tensors must be F32, F16 or BF16");
      }
      auto m = std::make_unique<lora_matrix>();
      m->a = kernels::pack_weight(static_cast<kernels::ggml_type>(ta->type), ta->data, rank, base.n_in(), level);
      m->n_out = base.n_out();
      m->bt = transposed_b(*tb, rank, m->n_out);
      m->a_act = static_cast<kernels::ggml_type>(ta->type);
      m->b_act = static_cast<kernels::ggml_type>(tb->type);
      m->scale = ad->alpha != 0.0f ? ad->alpha / static_cast<float>(rank) : 1.0f;
      ad->bytes += m->a.bytes() + m->bt.size() * sizeof(float);
      ad->max_rank = std::max<int32_t>(ad->max_rank, static_cast<int32_t>(rank));
      ad->layers[static_cast<size_t>(l)][static_cast<size_t>(tn.target)] = std::move(m);
    }
  }
  if (ad->max_rank == 0) throw std::runtime_error(where + "holds no LoRA tensor");
  return ad;
}

bool lora_runner::begin_step(const forward_batch& batch, std::span<const int32_t> seq_of_row,
                             std::span<const std::shared_ptr<const lora_adapter>> slots) {
  groups_.clear();
  bool any = false;
  for (const auto& s : batch.seqs) any |= s.adapter >= 0;
  if (!any) return false;
  for (size_t row = 0; row < seq_of_row.size(); ++row) {
    const int32_t slot = batch.seqs[static_cast<size_t>(seq_of_row[row])].adapter;
    if (slot < 0) continue;
    if (static_cast<size_t>(slot) >= slots.size() || !slots[static_cast<size_t>(slot)])
      throw std::invalid_argument("forward: no LoRA adapter in slot " + std::to_string(slot));
    const lora_adapter* ad = slots[static_cast<size_t>(slot)].get();
    auto it = std::find_if(groups_.begin(), groups_.end(), [ad](const group& g) { return g.adapter == ad; });
    if (it == groups_.end()) it = groups_.insert(groups_.end(), group{ad, {}});
    it->rows.push_back(static_cast<int64_t>(row));
  }
  return true;
}

void lora_runner::apply(int32_t layer, const float* x, int64_t ldx, std::initializer_list<lora_job> jobs) {
  // Plan: one item per (group, job) whose adapter adapts the job's target,
  // in tasks of consecutive rows (a row's result never depends on its task).
  items_.clear();
  size_t xs = 0, acts = 0, ts = 0;
  int64_t n_tasks = 0;
  const int64_t n_threads = pool_.n_threads();
  for (const group& g : groups_) {
    const auto n = static_cast<int64_t>(g.rows.size());
    for (const lora_job& j : jobs) {
      const lora_matrix* m = g.adapter->find(layer, j.target);
      if (!m) continue;
      const int64_t per_task = std::max<int64_t>(4, (n + 2 * n_threads - 1) / (2 * n_threads));
      items_.push_back(item{&g, &j, m, xs, acts, ts, per_task, n_tasks});
      xs += static_cast<size_t>(n * ldx);
      acts += (kernels::act_bytes(m->a, n) + 63) / 64 * 64;
      ts += static_cast<size_t>(n * m->rank());
      n_tasks += (n + per_task - 1) / per_task;
    }
  }
  if (items_.empty()) return;
  if (xg_.size() < xs) xg_.resize(xs);
  if (act_.size() < acts) act_.resize(acts);
  if (t_.size() < ts) t_.resize(ts);
  const auto& ops = kernels::ops();
  // Per task: gather its rows, t = A x, then y[row] += scale * B t.
  pool_.parallel_for(n_tasks, [&](int64_t task, int) {
    auto found = std::upper_bound(items_.begin(), items_.end(), task, [](int64_t v, const item& it) { return v < it.first_task; });
    const item& it = *(found - 1);
    const auto n = static_cast<int64_t>(it.g->rows.size());
    const int64_t r0 = (task - it.first_task) * it.rows_per_task;
    const int64_t r1 = std::min(n, r0 + it.rows_per_task);
    const int64_t rank = it.m->rank();
    float* xg = xg_.data() + it.x_off;
    for (int64_t r = r0; r < r1; ++r) {
      std::memcpy(xg + r * ldx, x + it.g->rows[static_cast<size_t>(r)] * ldx, static_cast<size_t>(ldx) * sizeof(float));
      round_like(it.m->a_act, xg + r * ldx, ldx);
    }
    const size_t row_act = kernels::act_bytes(it.m->a, 1);
    uint8_t* act = act_.data() + it.act_off + static_cast<size_t>(r0) * row_act;
    float* t = t_.data() + it.t_off + r0 * rank;
    kernels::quantize_act(it.m->a, xg + r0 * ldx, ldx, 0, r1 - r0, act);
    kernels::matmul(it.m->a, act, r1 - r0, t, rank, 0, rank);
    round_like(it.m->b_act, t, (r1 - r0) * rank);
    for (int64_t r = r0; r < r1; ++r) {
      ops.lora_expand(it.job->y + it.g->rows[static_cast<size_t>(r)] * it.job->ldy, it.m->bt.data(), it.m->n_out,
                      static_cast<int32_t>(rank), t + (r - r0) * rank, it.m->scale, it.m->n_out);
    }
  });
}

}  // namespace spate
