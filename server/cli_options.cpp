#include "server/cli_options.h"

#include <cstdlib>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "engine/byte_size.h"
#include "engine/thread_pool.h"
#include "kernels/isa.h"

namespace spate::cli {

namespace po = boost::program_options;

std::string default_model_path() {
  const char* cache = std::getenv("SPATE_CACHE_DIR");
  if (cache && *cache) return std::string(cache) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

void add_model_options(po::options_description& desc, model_options& o) {
  desc.add_options()
      ("model", po::value(&o.model_path), "GGUF model file (default: the cached SmolLM2-135M-Instruct Q4_1)")
      ("threads", po::value(&o.n_threads)->default_value(0), "worker threads of the device executor (0 = physical cores)")
      ("block-size", po::value(&o.block_size)->default_value(16), "KV cache block size in tokens")
      ("kv-cache-memory", po::value(&o.kv_cache_memory)->default_value("2GiB"), "KV cache memory budget, e.g. 2GiB, 512MiB")
      ("kv-cache-dtype", po::value(&o.kv_cache_dtype)->default_value("f16"), "KV cache element type: f16 or f32")
      ("max-model-len", po::value(&o.max_model_len)->default_value(0), "maximum tokens per sequence (0 = the model's context length)")
      ("seed", po::value(&o.seed)->default_value(0), "base seed for requests that do not set one")
      ("log-level", po::value(&o.log_level)->default_value("info"), "trace, debug, info, warn, error");
}

kernels::kv_dtype parse_kv_dtype(const std::string& s) {
  if (s == "f16" || s == "fp16" || s == "float16" || s == "auto") return kernels::kv_dtype::f16;
  if (s == "f32" || s == "fp32" || s == "float32") return kernels::kv_dtype::f32;
  throw std::invalid_argument("--kv-cache-dtype must be f16 or f32, got '" + s + "'");
}

std::string finish_model_options(model_options& o) {
  auto logger = spdlog::stderr_color_mt("spate");
  logger->set_pattern("%^%L%$ %m-%d %H:%M:%S.%e %v");
  spdlog::set_default_logger(logger);
  const auto level = spdlog::level::from_str(o.log_level);
  if (level == spdlog::level::off && o.log_level != "off") return "--log-level must be one of trace, debug, info, warn, error, off";
  spdlog::set_level(level);

  if (o.model_path.empty()) o.model_path = default_model_path();
  if (o.n_threads < 0 || o.n_threads > 1024) return "--threads must be in [0, 1024]";
  if (o.n_threads == 0) o.n_threads = physical_core_count();
  if (o.block_size < 1 || o.block_size > 1024) return "--block-size must be in [1, 1024]";
  if (!parse_byte_size(o.kv_cache_memory)) return "--kv-cache-memory '" + o.kv_cache_memory + "' is not a size like 2GiB or 512MiB";
  try {
    parse_kv_dtype(o.kv_cache_dtype);
  } catch (const std::exception& e) {
    return e.what();
  }
  if (o.max_model_len < 0) return "--max-model-len must be >= 0";
  const char* force = std::getenv("SPATE_FORCE_REFERENCE");
  o.force_reference = force && *force && std::string(force) != "0" && std::string(force) != "false";
  const auto isa = kernels::init_isa(o.force_reference);
  spdlog::info("Kernels: {}{}; device executor: {} threads", kernels::isa_name(isa),
               o.force_reference ? " (forced by SPATE_FORCE_REFERENCE)" : "", o.n_threads);
  return "";
}

}  // namespace spate::cli
