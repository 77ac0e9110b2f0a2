#include "cli/cli_options.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <iostream>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include "cli/speculative_options.h"
#include "util/byte_size.h"
#include "model/model_identity.h"
#include "model/model_loader.h"
#include "model/model_paths.h"
#include "model/thread_pool.h"
#include "kernels/isa.h"

namespace spate::cli {

namespace po = boost::program_options;

void add_model_options(po::options_description& desc, model_options& o) {
  desc.add_options()
      ("model", po::value(&o.model_paths)->composing(),
       "GGUF model file (default: the cached SmolLM2-135M-Instruct Q4_1); spate serve takes it repeatedly, one model per file")
      ("threads", po::value(&o.n_threads)->default_value(0), "worker threads of the device executor (0 = physical cores)")
      ("block-size", po::value(&o.block_size)->default_value(16), "KV cache block size in tokens")
      ("kv-cache-memory", po::value(&o.kv_cache_memory)->default_value("auto"),
       "KV cache memory budget, e.g. 2GiB, 512MiB; auto = 2GiB, or less when less memory is left after the model loads")
      ("kv-cache-dtype", po::value(&o.kv_cache_dtype)->default_value("f16"),
       "KV cache element type: f16, f32, q8_0 (int8 in groups of 32 dims with an f16 scale; needs head_dim % 32 == 0) "
       "or fp8_e5m2 (one byte per element, the top byte of an f16)")
      ("max-model-len", po::value(&o.max_model_len)->default_value(0), "maximum tokens per sequence (0 = the model's context length)")
      ("seed", po::value(&o.seed)->default_value(0), "base seed for requests that do not set one")
      ("log-level", po::value(&o.log_level)->default_value("info"), "trace, debug, info, warn, error")
      ("log-format", po::value(&o.log_format)->default_value("text"), "text or json (one JSON object per line)");
}

kernels::kv_dtype parse_kv_dtype(const std::string& s) {
  if (s == "f16" || s == "fp16" || s == "float16" || s == "auto") return kernels::kv_dtype::f16;
  if (s == "f32" || s == "fp32" || s == "float32") return kernels::kv_dtype::f32;
  if (s == "q8_0") return kernels::kv_dtype::q8_0;
  if (s == "fp8_e5m2") return kernels::kv_dtype::fp8_e5m2;
  throw std::invalid_argument("--kv-cache-dtype must be f16, f32, q8_0 or fp8_e5m2, got '" + s + "'");
}

namespace {

// %* : the log message as a JSON string body (quotes, backslashes and control
// characters escaped), for --log-format json.
class json_message_flag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    static constexpr char hex[] = "0123456789abcdef";
    for (char c : std::string_view(msg.payload.data(), msg.payload.size())) {
      const auto u = static_cast<unsigned char>(c);
      if (c == '"' || c == '\\') {
        dest.push_back('\\');
        dest.push_back(c);
      } else if (u < 0x20) {
        const char esc[] = {'\\', 'u', '0', '0', hex[u >> 4], hex[u & 15]};
        dest.append(esc, esc + 6);
      } else {
        dest.push_back(c);
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<json_message_flag>(); }
};

// %* : the log message with control characters escaped (\n, \r, \t, \xNN), for
// --log-format text: text a caller chose (an adapter's name, a path, a JSON
// key) can never start a forged log line or send terminal escapes.
class text_message_flag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    static constexpr char hex[] = "0123456789abcdef";
    for (char c : std::string_view(msg.payload.data(), msg.payload.size())) {
      const auto u = static_cast<unsigned char>(c);
      if (u >= 0x20 && u != 0x7f) {
        dest.push_back(c);
      } else if (c == '\n' || c == '\r' || c == '\t') {
        const char esc[] = {'\\', c == '\n' ? 'n' : c == '\r' ? 'r' : 't'};
        dest.append(esc, esc + 2);
      } else {
        const char esc[] = {'\\', 'x', hex[u >> 4], hex[u & 15]};
        dest.append(esc, esc + 4);
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<text_message_flag>(); }
};

}  // namespace

std::string finish_model_options(model_options& o) {
  if (o.log_format != "text" && o.log_format != "json") return "--log-format must be text or json";
  auto logger = spdlog::get("spate");
  if (!logger) logger = spdlog::stderr_color_mt("spate");
  if (o.log_format == "json") {
    auto f = std::make_unique<spdlog::pattern_formatter>();
    f->add_flag<json_message_flag>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","logger":"%n","pid":%P,"thread":%t,"msg":"%*"})");
    logger->set_formatter(std::move(f));
  } else {
    auto f = std::make_unique<spdlog::pattern_formatter>();
    f->add_flag<text_message_flag>('*').set_pattern("%^%L%$ %m-%d %H:%M:%S.%e %*");
    logger->set_formatter(std::move(f));
  }
  spdlog::set_default_logger(logger);
  // A log line that cannot be written (disk full, stderr closed) is dropped:
  // the server keeps serving rather than failing requests over its logs.
  // (spdlog's default handler would try to report it on stderr, which may be what failed.)
  spdlog::set_error_handler([](const std::string&) {});
  const auto level = spdlog::level::from_str(o.log_level);
  if (level == spdlog::level::off && o.log_level != "off") return "--log-level must be one of trace, debug, info, warn, error, off";
  spdlog::set_level(level);

  if (o.model_paths.size() > 1 && !o.several_models_ok) return "--model may be given once";
  if (!o.model_paths.empty()) o.model_path = o.model_paths.front();
  if (o.model_path.empty()) o.model_path = default_model_path();
  if (o.n_threads < 0 || o.n_threads > 1024) return "--threads must be in [0, 1024]";
  if (o.n_threads == 0) o.n_threads = physical_core_count();
  if (o.block_size < 1 || o.block_size > 1024) return "--block-size must be in [1, 1024]";
  if (o.kv_cache_memory != "auto") {
    const auto bytes = parse_byte_size(o.kv_cache_memory);
    if (!bytes) return "--kv-cache-memory '" + o.kv_cache_memory + "' is not a size like 2GiB or 512MiB, or auto";
    o.kv_cache_bytes = *bytes;
  }
  try {
    parse_kv_dtype(o.kv_cache_dtype);
  } catch (const std::exception& e) {
    return e.what();
  }
  if (o.max_model_len < 0) return "--max-model-len must be >= 0";
  if (auto err = read_isa_env(o.isa); !err.empty()) return err;
  spdlog::info("Kernels: {}; device executor: {} threads", init_kernels(o.isa), o.n_threads);
  return "";
}

int parse_command_line(const char* command, int argc, char** argv, const po::options_description& desc, po::variables_map& vm) {
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::cerr << "spate " << command << ": " << e.what() << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  return -1;
}

std::string parse_isa_env(const char* force_reference, const char* max_isa, isa_options& o) {
  const std::string force = force_reference ? force_reference : "";
  o.force_reference = !force.empty() && force != "0" && force != "false";
  o.max_isa = kernels::isa_level::avx512;
  if (max_isa && *max_isa && !kernels::parse_isa_level(max_isa, o.max_isa)) {
    return std::string("SPATE_MAX_ISA must be scalar, avx2 or avx512, got '") + max_isa + "'";
  }
  return "";
}

std::string read_isa_env(isa_options& o) {
  return parse_isa_env(std::getenv("SPATE_FORCE_REFERENCE"), std::getenv("SPATE_MAX_ISA"), o);
}

std::string init_kernels(const isa_options& o) {
  const kernels::isa_level level = kernels::init_isa(o.force_reference, o.max_isa);
  std::string out = kernels::isa_name(level);
  if (o.force_reference) {
    out += " (forced by SPATE_FORCE_REFERENCE)";
  } else if (level != kernels::detect_isa()) {
    out += std::string(" (capped by SPATE_MAX_ISA=") + kernels::isa_short_name(o.max_isa) + ")";
  }
  return out;
}

namespace {

// Reads SPATE_<name> as a positive integer into v (unchanged when unset).
std::string read_env_int(const std::string& name, int32_t& v) {
  const char* e = std::getenv(name.c_str());
  if (!e || !*e) return "";
  try {
    size_t used = 0;
    const long x = std::stol(e, &used);
    if (used != std::string(e).size() || x < 1 || x > (1 << 30)) throw std::invalid_argument("range");
    v = static_cast<int32_t>(x);
  } catch (const std::exception&) {
    return name + " must be a positive integer, got '" + e + "'";
  }
  return "";
}

std::string read_env_range(const std::string& prefix, bucket_range& r) {
  for (auto [suffix, field] : {std::pair{"_MIN", &r.min}, {"_STEP", &r.step}, {"_MAX", &r.max}}) {
    if (auto err = read_env_int(prefix + suffix, *field); !err.empty()) return err;
  }
  return validate(r, prefix.c_str());
}

bool env_true(const char* name) {
  const char* e = std::getenv(name);
  if (!e || !*e) return false;
  const std::string s(e);
  return s == "1" || s == "true" || s == "True" || s == "TRUE" || s == "yes" || s == "on";
}

}  // namespace

void add_engine_options(po::options_description& desc, engine_options& o) {
  const std::string batched_help =
      "prompt tokens per step: chunks, or whole prompts with --no-enable-chunked-prefill; the running sequences' decodes "
      "come on top (0 = auto: with chunked prefill, measured after warmup so a chunk costs about four 1-token steps, " +
      std::to_string(k_default_chunked_batched_tokens) + " when warmup is skipped; " +
      std::to_string(k_default_batched_tokens) + " without)";
  desc.add_options()
      ("max-num-seqs", po::value(&o.max_num_seqs)->default_value(scheduler_config{}.max_num_seqs), "sequences scheduled together per step")
      ("max-num-batched-tokens", po::value(&o.max_num_batched_tokens)->default_value(scheduler_config{}.max_num_batched_tokens),
       batched_help.c_str())
      ("enable-chunked-prefill", po::bool_switch(&o.enable_chunked_prefill_flag),
       "split prompts into chunks that share steps with decodes (default)")
      ("no-enable-chunked-prefill", po::bool_switch(&o.no_enable_chunked_prefill_flag),
       "prefill whole prompts in steps of their own, alternating with decode steps")
      ("enable-prefix-caching", po::bool_switch(&o.enable_prefix_caching_flag), "reuse the KV of cached prompt prefixes (default)")
      ("no-enable-prefix-caching", po::bool_switch(&o.no_enable_prefix_caching_flag), "disable prefix caching")
      ("max-queued-requests", po::value(&o.max_queued_requests)->default_value(engine_config{}.max_queued_requests), "requests waiting to run at most; more are rejected (each embeddings input counts as one)")
      ("warmup-max-seconds", po::value(&o.warmup_max_s)->default_value(engine_config{}.warmup_max_s, "5"),
       "warmup runs the buckets whose predicted cost fits in this many seconds; the smallest bucket of each kind "
       "always runs (0 = every bucket)")
      ("kv-cache-dir", po::value(&o.kv_cache_dir),
       "directory of the prefix cache's disk tier: full prompt blocks are written there and reloaded instead of "
       "recomputed, also after a restart (one subdirectory per model and KV format); unset: memory only")
      ("kv-cache-disk-bytes", po::value(&o.kv_cache_disk_bytes_text)->default_value("10GiB"),
       "bound on --kv-cache-dir's files per model, e.g. 10GiB, 512MiB; the least recently used are deleted beyond it")
      ("speculative-config", po::value(&o.speculative_config_json)->notifier([](const std::string& v) {
         if (v.empty()) throw po::error("--speculative-config must not be empty (a JSON object; omit the flag for none)");
       }),
       "speculative decoding, a JSON object as in vLLM: {\"method\": \"ngram\", \"num_speculative_tokens\": 4, "
       "\"prompt_lookup_max\": 4} or {\"model\": \"draft.gguf\", \"num_speculative_tokens\": 4}");
}

std::string finish_engine_options(engine_options& o) {
  if (o.max_num_seqs < 1) return "--max-num-seqs must be >= 1";
  if (o.max_num_batched_tokens < 0) return "--max-num-batched-tokens must be >= 1 (or 0 for the default)";
  if (o.enable_chunked_prefill_flag && o.no_enable_chunked_prefill_flag) {
    return "--enable-chunked-prefill and --no-enable-chunked-prefill are mutually exclusive";
  }
  o.enable_chunked_prefill = o.enable_chunked_prefill_flag || (!o.no_enable_chunked_prefill_flag && scheduler_config{}.enable_chunked_prefill);
  if (o.max_queued_requests < 1) return "--max-queued-requests must be >= 1";
  if (!(o.warmup_max_s >= 0.0 && o.warmup_max_s <= 86400.0)) return "--warmup-max-seconds must be within [0, 86400]";
  if (o.enable_prefix_caching_flag && o.no_enable_prefix_caching_flag) {
    return "--enable-prefix-caching and --no-enable-prefix-caching are mutually exclusive";
  }
  o.enable_prefix_caching = o.enable_prefix_caching_flag || (!o.no_enable_prefix_caching_flag && engine_config{}.enable_prefix_caching);
  if (const auto bytes = parse_byte_size(o.kv_cache_disk_bytes_text.empty() ? "10GiB" : o.kv_cache_disk_bytes_text)) {
    o.kv_cache_disk_bytes = *bytes;
  } else {
    return "--kv-cache-disk-bytes '" + o.kv_cache_disk_bytes_text + "' is not a size like 10GiB or 512MiB";
  }
  if (!o.kv_cache_dir.empty() && !o.enable_prefix_caching) return "--kv-cache-dir needs prefix caching (drop --no-enable-prefix-caching)";
  if (auto err = parse_speculative_config(o.speculative_config_json, o.speculative, o.draft_model_path); !err.empty()) {
    return err;
  }
  for (auto [prefix, range] : {std::pair{"SPATE_PROMPT_BS_BUCKET", &o.buckets.prompt_bs},
                               {"SPATE_PROMPT_SEQ_BUCKET", &o.buckets.prompt_seq},
                               {"SPATE_DECODE_BS_BUCKET", &o.buckets.decode_bs},
                               {"SPATE_DECODE_BLOCK_BUCKET", &o.buckets.decode_block}}) {
    if (auto err = read_env_range(prefix, *range); !err.empty()) return err;
  }
  o.skip_warmup = env_true("SPATE_SKIP_WARMUP");
  return "";
}

engine_config make_engine_config(const model_options& mo, const engine_options& eo, int32_t max_model_len) {
  engine_config c;
  c.seed = mo.seed;
  c.sched.max_model_len = max_model_len;
  c.sched.max_num_seqs = eo.max_num_seqs;
  c.sched.max_num_batched_tokens = eo.max_num_batched_tokens;
  c.sched.enable_chunked_prefill = eo.enable_chunked_prefill;
  c.enable_prefix_caching = eo.enable_prefix_caching;
  c.max_queued_requests = eo.max_queued_requests;
  c.buckets = eo.buckets;
  c.skip_warmup = eo.skip_warmup;
  c.warmup_max_s = eo.warmup_max_s;
  c.speculative = eo.speculative;  // a draft model's proposer is added by the caller that loads it
  if (!eo.kv_cache_dir.empty()) {
    c.kv_disk.dir = eo.kv_cache_dir;
    c.kv_disk.max_bytes = eo.kv_cache_disk_bytes;
    c.kv_disk.model_id = model_file_identity(mo.model_path);  // reads at most 3 MiB of the file
  }
  return c;
}

executor_config make_executor_config(const model_options& mo) {
  executor_config c;
  c.n_threads = mo.n_threads;
  c.block_size = mo.block_size;
  c.kv_cache_bytes = mo.kv_cache_bytes;
  c.kv_dtype = parse_kv_dtype(mo.kv_cache_dtype);
  return c;
}

std::string flag_names(std::string msg) {
  static constexpr std::pair<std::string_view, std::string_view> k_fields[] = {
      {"kv_cache_bytes", "--kv-cache-memory"},
      {"block_size", "--block-size"},
      {"n_threads", "--threads"},
      {"max_queued_requests", "--max-queued-requests"},
      {"max_model_len", "--max-model-len"},
      {"max_num_seqs", "--max-num-seqs"},
      {"max_num_batched_tokens", "--max-num-batched-tokens"},
      {"skip_warmup", "SPATE_SKIP_WARMUP"},
      {"warmup_max_s", "--warmup-max-seconds"},
  };
  auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (const auto& [field, flag] : k_fields) {
    for (size_t pos = msg.find(field); pos != std::string::npos; pos = msg.find(field, pos)) {
      const size_t end = pos + field.size();
      if ((pos > 0 && is_word(msg[pos - 1])) || (end < msg.size() && is_word(msg[end]))) {
        pos = end;
        continue;
      }
      msg.replace(pos, field.size(), flag);
      pos += flag.size();
    }
  }
  return msg;
}

namespace {

// What --kv-cache-memory auto leaves free after the model's weights, for the
// workspaces, the server and the page cache's working set.
constexpr uint64_t k_kv_headroom_bytes = 1ull << 30;

// Resolves --kv-cache-memory against the memory left after loading; "" or an error.
std::string resolve_kv_budget(model_options& mo) {
  const uint64_t avail = available_memory_bytes();
  const uint64_t left = avail > k_kv_headroom_bytes ? avail - k_kv_headroom_bytes : 0;
  if (mo.kv_cache_memory == "auto") {
    mo.kv_cache_bytes = k_auto_kv_cache_bytes;
    if (avail != 0 && left < mo.kv_cache_bytes) {
      mo.kv_cache_bytes = std::max<uint64_t>(left, 64ull << 20);
      spdlog::warn("KV cache budget: auto is {} (the default 2.00 GiB does not fit: {} available after loading the model, "
                   "{} kept free)", format_bytes(mo.kv_cache_bytes), format_bytes(avail), format_bytes(k_kv_headroom_bytes));
    }
    return "";
  }
  if (avail != 0 && mo.kv_cache_bytes > left) {
    return "--kv-cache-memory " + mo.kv_cache_memory + " does not fit: " + format_bytes(avail) +
           " is available after loading the model, of which " + format_bytes(k_kv_headroom_bytes) +
           " stays free for the runtime; use --kv-cache-memory auto or at most " + format_bytes(left);
  }
  return "";
}

}  // namespace

std::string fit_loaded_model(model_options& mo, loaded_model& model, int32_t& max_model_len) {
  if (mo.max_model_len > model.config.n_ctx_train) {
    return "--max-model-len " + std::to_string(mo.max_model_len) + " is greater than the model's context length " +
           std::to_string(model.config.n_ctx_train);
  }
  if (std::string err = resolve_kv_budget(mo); !err.empty()) return err;
  max_model_len = mo.max_model_len > 0 ? mo.max_model_len : model.config.n_ctx_train;
  select_rope_factors(model.weights, model.config, max_model_len);
  return "";
}

int load_model_for_command(const char* cmd, model_options& mo, std::unique_ptr<loaded_model>& model, int32_t& max_model_len,
                           const load_progress_fn& on_progress) {
  try {
    model = load_model(mo.model_path, kernels::active_isa(), on_progress);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    std::cerr << "spate " << cmd << ": " << e.what() << "\n";
    return 1;
  }
  if (const std::string err = fit_loaded_model(mo, *model, max_model_len); !err.empty()) {
    spdlog::error("{}", err);
    std::cerr << "spate " << cmd << ": " << err << "\n";
    return 2;
  }
  return 0;
}

}  // namespace spate::cli
