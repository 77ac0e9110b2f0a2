#include "cli/model_catalog.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <span>

#include "cli/speculative_options.h"
#include <boost/json.hpp>

#include "model/gguf_file.h"
#include "model/lora.h"
#include "util/byte_size.h"

namespace spate::cli {

namespace fs = std::filesystem;

namespace {

// A section's settings before they are applied.
struct section {
  std::string path;
  std::map<std::string, std::string> values;  // key -> value, every key but path and lora-modules
  std::vector<std::string> lora_modules;      // lora-modules (repeatable): adapters bound to this model
};

const std::vector<std::string>& section_keys() {
  static const std::vector<std::string> k = {"path", "chat-template", "max-model-len", "kv-cache-memory", "speculative-config",
                                             "pooling", "pinned", "lora-modules"};
  return k;
}

// Splits "model.NAME.KEY" into sections. "" or the error.
std::string read_sections(const section_options& opts, std::vector<std::pair<std::string, section>>& out) {
  for (const auto& [key, value] : opts) {
    const size_t dot = key.rfind('.');
    if (!key.starts_with("model.") || dot <= 6) return "--config: unknown option '" + key + "'";
    const std::string name = key.substr(6, dot - 6);
    const std::string field = key.substr(dot + 1);
    if (std::find(section_keys().begin(), section_keys().end(), field) == section_keys().end())
      return "--config: [model." + name + "] has an unknown key '" + field + "' (known: path, chat-template, max-model-len, "
             "kv-cache-memory, speculative-config, pooling, pinned, lora-modules)";
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& s) { return s.first == name; });
    if (it == out.end()) it = out.insert(out.end(), {name, section{}});
    if (field == "path") {
      it->second.path = value;
    } else if (field == "lora-modules") {
      it->second.lora_modules.push_back(value);
    } else {
      it->second.values[field] = value;
    }
  }
  return "";
}

std::optional<bool> parse_bool(const std::string& v) {
  if (v == "true" || v == "1" || v == "yes" || v == "on") return true;
  if (v == "false" || v == "0" || v == "no" || v == "off") return false;
  return std::nullopt;
}

// Applies a section's values to m. "" or the error naming the key.
std::string apply_section(const std::string& name, const section& s, catalog_model& m) {
  const std::string where = "--config [model." + name + "] ";
  for (const auto& [key, v] : s.values) {
    if (key == "chat-template") {
      m.serve.chat_template_file = v;
    } else if (key == "pooling") {
      if (v != "mean" && v != "last" && v != "cls") return where + "pooling must be mean, last or cls, got '" + v + "'";
      m.serve.pooling = v;
    } else if (key == "pinned") {
      const auto b = parse_bool(v);
      if (!b) return where + "pinned must be true or false, got '" + v + "'";
      m.spec.pinned = *b;
    } else if (key == "max-model-len") {
      try {
        size_t used = 0;
        const long n = std::stol(v, &used);
        if (used != v.size() || n < 0 || n > (1 << 24)) throw std::invalid_argument("range");
        m.model.max_model_len = static_cast<int32_t>(n);
      } catch (const std::exception&) {
        return where + "max-model-len must be an integer in [0, 16777216], got '" + v + "'";
      }
    } else if (key == "kv-cache-memory") {
      m.model.kv_cache_memory = v;
      if (v != "auto") {
        const auto bytes = parse_byte_size(v);
        if (!bytes) return where + "kv-cache-memory '" + v + "' is not a size like 2GiB or 512MiB, or auto";
        m.model.kv_cache_bytes = *bytes;
      }
    } else if (key == "speculative-config") {
      m.engine.speculative_config_json = v;
      m.engine.speculative = {};
      m.engine.draft_model_path.clear();
      if (auto err = parse_speculative_config(v, m.engine.speculative, m.engine.draft_model_path); !err.empty())
        return where + err;
    }
  }
  return "";
}

// llama.cpp's names of general.file_type (llama_ftype), "" for others.
std::string file_type_name(int64_t t) {
  static const std::map<int64_t, const char*> names = {{0, "F32"},     {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},   {7, "Q8_0"},
                                                       {8, "Q5_0"},    {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"},
                                                       {13, "Q3_K_L"}, {14, "Q4_K_S"}, {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},
                                                       {18, "Q6_K"},   {25, "IQ4_NL"}, {32, "BF16"},   {38, "MXFP4_MOE"}};
  const auto it = names.find(t);
  return it == names.end() ? "" : it->second;
}

// The architecture and file type from the file's header, when it can be read.
void read_header(model_spec& spec) {
  try {
    const auto f = gguf_file::open(spec.path);
    spec.arch = f->get_string("general.architecture").value_or("");
    spec.quantization = file_type_name(f->get_int("general.file_type").value_or(-1));
  } catch (const std::exception&) {
  }
}

// Reads the file's GGUF header: the trained context (for listing) or the
// reason it cannot be served, into spec.
void check_file(model_spec& spec, const model_options& mo) {
  std::error_code ec;
  const auto size = fs::file_size(spec.path, ec);
  spec.memory_bytes = (ec ? 0 : size) + mo.kv_cache_bytes;
  try {
    const auto f = gguf_file::open(spec.path);
    const auto arch = f->get_string("general.architecture");
    if (!arch) throw std::runtime_error(spec.path + ": general.architecture is missing");
    spec.arch = *arch;
    spec.quantization = file_type_name(f->get_int("general.file_type").value_or(-1));
    const auto ctx = f->get_int(*arch + ".context_length");
    if (ctx && *ctx > 0) spec.max_model_len = mo.max_model_len > 0 ? mo.max_model_len : static_cast<int32_t>(std::min<int64_t>(*ctx, 1 << 24));
  } catch (const std::exception& e) {
    spec.error = e.what();
  }
}

// One --lora-modules value: NAME=PATH or vLLM's JSON object. "" or the error.
std::string parse_lora_module(const std::string& v, model_spec& spec) {
  if (!v.empty() && v.front() == '{') {
    boost::system::error_code ec;
    const boost::json::value j = boost::json::parse(v, ec);
    const auto* o = j.if_object();
    const auto* name = o ? o->if_contains("name") : nullptr;
    const auto* path = o ? o->if_contains("path") : nullptr;
    if (ec || !name || !name->is_string() || !path || !path->is_string())
      return "--lora-modules '" + v + "': a JSON value needs string \"name\" and \"path\"";
    spec.id = std::string(name->as_string());
    spec.path = std::string(path->as_string());
    if (const auto* base = o->if_contains("base_model_name"); base && base->is_string()) spec.parent = std::string(base->as_string());
  } else {
    const size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) return "--lora-modules '" + v + "' must be NAME=PATH or a JSON object";
    spec.id = v.substr(0, eq);
    spec.path = v.substr(eq + 1);
  }
  return "";
}

// One adapter to bind: a --lora-modules value, or a [model.NAME] section's
// lora-modules value (section: NAME, the base it is bound to).
struct adapter_value {
  std::string value;
  std::string section;
};

// The served models' GGUF headers, each opened once (null: it cannot be read).
class base_headers {
 public:
  const gguf_file* get(const model_spec& s) {
    auto it = files_.find(s.id);
    if (it != files_.end()) return it->second.get();
    std::unique_ptr<gguf_file> f;
    if (s.error.empty()) {
      try {
        f = gguf_file::open(s.path);
      } catch (const std::exception&) {
      }
    }
    return files_.emplace(s.id, std::move(f)).first->second.get();
  }

 private:
  std::map<std::string, std::unique_ptr<gguf_file>> files_;
};

// Binds adapter a to the base it fits: the one it names (base_model_name, or
// its section), which must fit, else the only served model it fits. "" or the
// error that stops start-up (unreadable, not an adapter, fitting none or
// several). single: the single-model server, whose unreadable model file is
// reported when it loads.
std::string bind_adapter(catalog_model& a, const std::string& section, std::span<const catalog_model> out, base_headers& heads,
                         int32_t max_rank, bool single) {
  const std::string where = "--lora-modules " + a.spec.id + ": ";
  if (!section.empty()) {
    if (!a.spec.parent.empty() && a.spec.parent != section)
      return "--config [model." + section + "] lora-modules " + a.spec.id + ": its base_model_name '" + a.spec.parent + "' is another model";
    a.spec.parent = section;
  }
  std::unique_ptr<gguf_file> af;
  try {
    af = gguf_file::open(a.spec.path);
  } catch (const std::exception& e) {
    return where + e.what();
  }
  if (af->get_string("general.type").value_or("") != "adapter" || af->get_string("adapter.type").value_or("") != "lora")
    return where + a.spec.path + ": not a LoRA adapter (general.type must be 'adapter' and adapter.type 'lora')";
  // "" when a fits base b (or b's unreadable file is the single model's, reported when it loads).
  auto fit = [&](const catalog_model& b) -> std::string {
    const gguf_file* bf = heads.get(b.spec);
    if (!bf) return single ? "" : (b.spec.error.empty() ? "its file cannot be read" : b.spec.error);
    return lora_fits_base(*af, *bf, max_rank);
  };
  if (!a.spec.parent.empty()) {
    const auto parent = std::find_if(out.begin(), out.end(), [&](const catalog_model& m) { return m.spec.id == a.spec.parent; });
    if (parent == out.end() || !parent->spec.parent.empty()) return where + "the base model '" + a.spec.parent + "' is not served";
    if (auto why = fit(*parent); !why.empty()) return where + a.spec.path + " does not fit its base model '" + a.spec.parent + "': " + why;
    return "";
  }
  std::vector<std::string> fitting;
  std::string reasons;
  for (const auto& b : out) {
    if (!b.spec.parent.empty()) continue;
    if (auto why = fit(b); why.empty()) {
      fitting.push_back(b.spec.id);
    } else {
      reasons += (reasons.empty() ? "" : "; ") + b.spec.id + ": " + why;
    }
  }
  if (fitting.empty()) return where + a.spec.path + " fits no served model (" + reasons + ")";
  if (fitting.size() > 1) {
    std::string names;
    for (const auto& n : fitting) names += (names.empty() ? "" : ", ") + n;
    return where + a.spec.path + " fits several models (" + names + "): name its base with {\"name\", \"path\", \"base_model_name\"} "
           "or list it under that model's [model.NAME] lora-modules in --config";
  }
  a.spec.parent = fitting.front();
  return "";
}

// Adds the --lora-modules and sections' adapters to out, each bound to its
// base model. "" or the error that stops start-up.
std::string add_lora_modules(const catalog_inputs& in, const std::vector<adapter_value>& values, std::vector<catalog_model>& out,
                             bool single) {
  base_headers heads;
  const size_t n_models = out.size();
  for (const auto& v : values) {
    catalog_model a;
    if (auto err = parse_lora_module(v.value, a.spec); !err.empty()) return err;
    for (const auto& m : out)
      if (m.spec.id == a.spec.id) return "--lora-modules: the id '" + a.spec.id + "' is taken";
    const std::span<const catalog_model> bases(out.data(), n_models);  // the models, not the adapters added meanwhile
    if (auto err = bind_adapter(a, v.section, bases, heads, in.serve->max_lora_rank, single); !err.empty()) return err;
    const auto parent = std::find_if(bases.begin(), bases.end(), [&](const catalog_model& m) { return m.spec.id == a.spec.parent; });
    a.spec.max_model_len = parent->spec.max_model_len;
    out.push_back(std::move(a));  // after the last use of bases (push_back may move out's elements)
  }
  return "";
}

std::vector<adapter_value> command_line_adapters(const catalog_inputs& in) {
  std::vector<adapter_value> v;
  for (const auto& m : in.serve->lora_modules) v.push_back({m, ""});
  return v;
}

catalog_model make_model(std::string id, std::string path, const catalog_inputs& in) {
  catalog_model m;
  m.spec.id = std::move(id);
  m.spec.path = std::move(path);
  m.model = *in.model;
  m.model.model_path = m.spec.path;
  m.engine = *in.engine;
  m.serve = *in.serve;
  return m;
}

}  // namespace

bool single_model(const catalog_inputs& in) {
  return in.models_dir.empty() && in.model_paths.size() <= 1 && in.sections.empty();
}

std::string collect_models(const catalog_inputs& in, std::vector<catalog_model>& out) {
  out.clear();
  if (single_model(in)) {
    std::string path = in.model_paths.empty() ? in.model->model_path : in.model_paths.front();
    std::string id = in.serve->served_model_name.empty() ? fs::path(path).stem().string() : in.serve->served_model_name;
    out.push_back(make_model(std::move(id), std::move(path), in));
    out.back().spec.pinned = true;
    read_header(out.back().spec);  // its errors come when it loads, with their exit codes
    return add_lora_modules(in, command_line_adapters(in), out, /*single=*/true);  // refused before the model loads
  }
  if (!in.serve->served_model_name.empty())
    return "--served-model-name names the model of a single-model server; with several, the ids are the file stems or the "
           "config file's [model.NAME] sections";
  auto add = [&](std::string id, std::string path) -> std::string {
    for (const auto& m : out)
      if (m.spec.id == id) return "two models have the id '" + id + "' (" + m.spec.path + " and " + path + ")";
    out.push_back(make_model(std::move(id), std::move(path), in));
    return "";
  };
  for (const auto& p : in.model_paths)
    if (auto err = add(fs::path(p).stem().string(), p); !err.empty()) return err;
  if (!in.models_dir.empty()) {
    std::error_code ec;
    if (!fs::is_directory(in.models_dir, ec)) return "--models-dir " + in.models_dir + ": not a readable directory";
    std::vector<fs::path> files;
    // Error codes throughout: an entry that cannot be stat'ed (a symbolic link loop) is
    // listed, and check_file gives it its error.
    fs::directory_iterator it(in.models_dir, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      std::error_code entry_ec;
      if (it->path().extension() == ".gguf" && !it->is_directory(entry_ec)) files.push_back(it->path());
    }
    if (ec) return "--models-dir " + in.models_dir + ": " + ec.message();
    std::sort(files.begin(), files.end());
    for (const auto& f : files)
      if (auto err = add(f.stem().string(), f.string()); !err.empty()) return err;
  }
  std::vector<std::pair<std::string, section>> sections;
  if (auto err = read_sections(in.sections, sections); !err.empty()) return err;
  for (const auto& [name, s] : sections) {
    auto it = std::find_if(out.begin(), out.end(), [&](const catalog_model& m) { return m.spec.id == name; });
    if (it == out.end()) {
      if (s.path.empty()) return "--config [model." + name + "] needs a path (no --model or --models-dir file has that id)";
      out.push_back(make_model(name, s.path, in));
      it = out.end() - 1;
    } else if (!s.path.empty()) {
      it->spec.path = s.path;
      it->model.model_path = s.path;
    }
    if (auto err = apply_section(name, s, *it); !err.empty()) return err;
  }
  if (out.empty()) return "--models-dir " + in.models_dir + " holds no *.gguf file";
  for (auto& m : out) check_file(m.spec, m.model);
  std::vector<adapter_value> adapters = command_line_adapters(in);
  for (const auto& [name, sec] : sections)
    for (const auto& v : sec.lora_modules) adapters.push_back({v, name});
  return add_lora_modules(in, adapters, out, /*single=*/false);
}

}  // namespace spate::cli
