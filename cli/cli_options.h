// Options shared by the subcommands that load a model, read once from the
// command line (and, for the few SPATE_* variables, the environment) into a
// typed struct. Nothing deeper reads the environment.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_config.h"
#include "kernels/ops.h"
#include "model/model_executor.h"
#include "model/model_loader.h"

namespace spate {
struct loaded_model;
}

namespace spate::cli {

// The kernel level's environment, read once at start-up (read_isa_env) and
// applied by init_kernels():
//   SPATE_FORCE_REFERENCE: set, non-empty and not "0" or "false": the scalar
//     reference kernels;
//   SPATE_MAX_ISA=scalar|avx2|avx512: the highest level to run. It caps the
//     level CPUID allows and never raises it (avx512 on an AVX2-only CPU runs
//     avx2); scalar is the reference. Unset or empty: no cap.
struct isa_options {
  bool force_reference = false;
  kernels::isa_level max_isa = kernels::isa_level::avx512;  // avx512, the highest: no cap
};

// Parses the two variables' values (nullptr: unset) into o. Returns "" or an
// error naming the variable and its accepted values.
std::string parse_isa_env(const char* force_reference, const char* max_isa, isa_options& o);

// Parses a subcommand's command line into vm, printing desc for --help.
// Returns -1 to go on, else the exit code: 0 after --help, 2 after a parse
// error (printed to stderr as "spate <command>: <what>").
int parse_command_line(const char* command, int argc, char** argv, const boost::program_options::options_description& desc,
                       boost::program_options::variables_map& vm);

// parse_isa_env() of this process's SPATE_FORCE_REFERENCE and SPATE_MAX_ISA.
std::string read_isa_env(isa_options& o);

// Fixes the kernel level (kernels::init_isa) from o, before any weight is
// loaded. Returns the "Kernels: ..." description for the start-up log: the
// level's name, and why when it is below what the CPU allows, e.g.
// "avx2+fma+f16c (capped by SPATE_MAX_ISA=avx2)".
std::string init_kernels(const isa_options& o);

// --kv-cache-memory auto's budget when the memory left allows it.
inline constexpr uint64_t k_auto_kv_cache_bytes = 2ull << 30;

struct model_options {
  std::string model_path;         // --model; default: the cached SmolLM2-135M-Instruct Q4_1
  std::vector<std::string> model_paths;  // every --model given (serve takes several; the others one)
  bool several_models_ok = false;        // set by serve before finish_model_options
  int32_t n_threads = 0;          // --threads; 0 = physical cores
  int32_t block_size = 16;        // --block-size
  std::string kv_cache_memory;    // --kv-cache-memory, e.g. "2GiB", or "auto" (see kv_cache_bytes)
  // The KV budget in bytes: the size given, or for "auto" 2 GiB capped at the
  // memory left after the model loaded (load_model_for_command resolves it;
  // 2 GiB when nothing resolved it).
  uint64_t kv_cache_bytes = k_auto_kv_cache_bytes;
  std::string kv_cache_dtype = "f16";  // --kv-cache-dtype f16|f32|q8_0|fp8_e5m2
  int32_t max_model_len = 0;      // --max-model-len; 0 = the model's trained context
  uint64_t seed = 0;              // --seed: base of per-request seeds when a request sets none
  std::string log_level = "info"; // --log-level
  std::string log_format = "text"; // --log-format text|json (one JSON object per line)
  isa_options isa;                // SPATE_FORCE_REFERENCE, SPATE_MAX_ISA (read by finish_model_options)
};

// Options of the serving engine (scheduler, prefix cache, queue), plus the
// SPATE_{PROMPT,DECODE}_{BS,SEQ,BLOCK}_BUCKET_{MIN,STEP,MAX} and
// SPATE_SKIP_WARMUP environment variables, read once by finish_engine_options().
struct engine_options {
  // Defaults come from the typed engine configuration (engine_config.h):
  // one default per setting, read by the flags' descriptions too.
  int32_t max_num_seqs = scheduler_config{}.max_num_seqs;  // --max-num-seqs
  // --max-num-batched-tokens: prompt tokens per step (the running sequences'
  // decodes come on top, see engine/scheduler.h); 0 = auto (engine_config.h,
  // k_default_batched_tokens: measured after warmup with chunked prefill).
  int32_t max_num_batched_tokens = 0;
  bool enable_chunked_prefill_flag = false;     // --enable-chunked-prefill (the default)
  bool no_enable_chunked_prefill_flag = false;  // --no-enable-chunked-prefill
  bool enable_prefix_caching_flag = false;     // --enable-prefix-caching (the default)
  bool no_enable_prefix_caching_flag = false;  // --no-enable-prefix-caching
  int32_t max_queued_requests = engine_config{}.max_queued_requests;  // --max-queued-requests
  double warmup_max_s = engine_config{}.warmup_max_s;                  // --warmup-max-seconds
  std::string speculative_config_json;    // --speculative-config (cli/speculative_options.h)
  std::string kv_cache_dir;               // --kv-cache-dir: the prefix cache's disk tier ("": none)
  std::string kv_cache_disk_bytes_text;   // --kv-cache-disk-bytes, e.g. "10GiB"
  uint64_t kv_cache_disk_bytes = k_default_kv_disk_bytes;  // filled by finish_engine_options()
  // Filled by finish_engine_options():
  bool enable_chunked_prefill = scheduler_config{}.enable_chunked_prefill;
  speculative_config speculative;
  std::string draft_model_path;           // "model" of --speculative-config
  bool enable_prefix_caching = engine_config{}.enable_prefix_caching;
  bucket_config buckets;
  bool skip_warmup = false;
};

void add_engine_options(boost::program_options::options_description& desc, engine_options& opts);

// Validates the flags and reads the bucket / warmup environment variables.
// Returns "" or an error message.
std::string finish_engine_options(engine_options& opts);

// The engine configuration for a loaded model (max_model_len already resolved).
engine_config make_engine_config(const model_options& mo, const engine_options& eo, int32_t max_model_len);

// The forward executor's configuration (threads, KV block size, budget, dtype).
executor_config make_executor_config(const model_options& mo);

// msg with the configuration field names that engine and model errors use
// (kv_cache_bytes, block_size, max_queued_requests, ...) replaced by the
// command-line flags that set them (--kv-cache-memory, --block-size, ...).
std::string flag_names(std::string msg);

// Adds the options above to desc, bound to opts.
void add_model_options(boost::program_options::options_description& desc, model_options& opts);

// Applies defaults that depend on the machine or environment, sets up logging
// (stderr) and the kernel ISA. Returns "" or an error message.
std::string finish_model_options(model_options& opts);

// Loads mo.model_path and resolves --max-model-len (0 = the model's context;
// beyond it is refused, as vLLM does). On failure prints "spate CMD: why" to
// stderr and returns the exit code (1: the model, 2: the flag); 0 on success.
int load_model_for_command(const char* cmd, model_options& mo, std::unique_ptr<loaded_model>& model, int32_t& max_model_len,
                           const load_progress_fn& on_progress = {});

// The checks and settings load_model_for_command applies after loading:
// --max-model-len against the model's context (resolved into max_model_len),
// the --kv-cache-memory budget against the memory left, the RoPE factors.
// Returns "" or the error naming the flag.
std::string fit_loaded_model(model_options& mo, loaded_model& model, int32_t& max_model_len);

kernels::kv_dtype parse_kv_dtype(const std::string& s);

}  // namespace spate::cli
