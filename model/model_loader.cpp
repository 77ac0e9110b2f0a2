#include "model/model_loader.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <stdexcept>
#include <spdlog/spdlog.h>

#include "util/byte_size.h"
#include "util/progress.h"
#include "model/tokenizer_gguf.h"

namespace spate {

uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages_total = 0, pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return pages_resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

uint64_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

namespace {

// Refuses a model whose repacked weights cannot fit: they are anonymous
// memory (the file's pages are released as they are copied), which without
// swap would end in an OOM kill mid-load or mid-serve rather than a message.
// Headroom for the runtime's workspaces and the KV cache's minimum.
constexpr uint64_t k_load_headroom_bytes = 512ull << 20;

void check_fits(const gguf_file& f, kernels::isa_level level) {
  if (level == kernels::isa_level::scalar) return;  // reads the mapping as is; the page cache can evict it
  uint64_t matrices = 0;
  for (const auto& t : f.tensors()) {
    if (t.dims.size() >= 2) matrices += t.n_bytes;
  }
  const uint64_t avail = available_memory_bytes();
  if (avail == 0 || matrices + k_load_headroom_bytes <= avail) return;
  throw std::runtime_error("model '" + f.path() + "' needs about " + format_bytes(matrices + k_load_headroom_bytes) +
                           " of memory (" + format_bytes(matrices) + " of weights repacked for the " +
                           kernels::isa_name(level) + " kernels, plus " + format_bytes(k_load_headroom_bytes) +
                           " for the runtime), but only " + format_bytes(avail) +
                           " is available (MemAvailable); free memory or use a smaller quantization of the model");
}

}  // namespace

std::unique_ptr<loaded_model> load_model(const std::string& path, kernels::isa_level level, const load_progress_fn& on_progress) {
  const auto t0 = std::chrono::steady_clock::now();
  auto m = std::make_unique<loaded_model>();
  m->file = gguf_file::open(path);
  const gguf_file& f = *m->file;
  m->config = read_model_config(f);
  const model_config& c = m->config;
  spdlog::info("Loading model {} (GGUF v{}, {}, arch {}, {} layers, n_embd {}, n_head {}/{} kv, n_ff {}, vocab {}, ctx {})", path,
               f.version(), format_bytes(f.file_bytes()), c.arch, c.n_layer, c.n_embd, c.n_head, c.n_head_kv, c.n_ff, c.n_vocab,
               c.n_ctx_train);
  std::map<std::string, int> type_counts;
  for (const auto& t : f.tensors()) ++type_counts[kernels::type_name(t.type)];
  std::string types;
  for (const auto& [name, n] : type_counts) types += (types.empty() ? "" : ", ") + name + ": " + std::to_string(n);
  spdlog::info("Tensor types: {}", types);

  check_fits(f, level);
  m->tok = std::make_unique<tokenizer>(vocab_spec_from_gguf(f));
  if (m->tok->n_vocab() != c.n_vocab) {
    throw gguf_error("model '" + path + "': tokenizer has " + std::to_string(m->tok->n_vocab()) +
                     " tokens but the model's vocabulary is " + std::to_string(c.n_vocab));
  }
  m->chat_template = f.get_string("tokenizer.chat_template").value_or("");
  percent_steps steps(c.n_layer + 1);
  m->weights = load_model_weights(f, c, level, [&](int32_t done, int32_t total) {
    const auto pct = steps.advance(done);
    if (!pct) return;
    const std::string what = std::to_string(std::min(done, c.n_layer)) + "/" + std::to_string(c.n_layer) + " layers" +
                             (done == total ? " and the output" : "");
    spdlog::info("Loading weights: {}% ({})", *pct, what);
    if (on_progress) on_progress(*pct, what);
  });
  // Touch nothing here: the mapping is paged in on first use; report sizes.
  const auto t1 = std::chrono::steady_clock::now();
  m->load_seconds = std::chrono::duration<double>(t1 - t0).count();
  // The weights' memory: the repacked copies, plus what the kernels still read
  // from the mapping (all of it for the scalar kernels; else token_embd's rows,
  // looked up one by one: the other tensors' pages were dropped once copied).
  const uint64_t from_file = level == kernels::isa_level::scalar
                                 ? m->weights.file_weight_bytes
                                 : static_cast<uint64_t>(m->weights.tok_embd_row_bytes) * static_cast<uint64_t>(c.n_vocab);
  const uint64_t mem = from_file + m->weights.owned_bytes;
  spdlog::info("Model weights: {} from the file, {} repacked for {} kernels{}", format_bytes(m->weights.file_weight_bytes),
               format_bytes(m->weights.owned_bytes), kernels::isa_name(level),
               m->weights.tied_output ? ", output tied to token_embd" : "");
  spdlog::info("Model loading took {:.4f} GiB and {:.3f} seconds (resident set now {})",
               static_cast<double>(mem) / (1024.0 * 1024 * 1024), m->load_seconds, format_bytes(resident_bytes()));
  return m;
}

}  // namespace spate
