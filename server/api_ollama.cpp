#include "server/api_ollama.h"

#include <boost/json.hpp>
#include <ctime>
#include <filesystem>

#include "jinja/chat_template.h"
#include "server/api_embeddings.h"
#include "server/api_router.h"
#include "server/model_wait.h"

namespace spate {

namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

constexpr auto k_shape = api::endpoint::ollama_chat;  // Ollama's error shape

http::response<http::string_body> ollama_error(int status, const std::string& message, unsigned v) {
  return make_api_error_response(k_shape, api::api_error{status, message, "", "", ""}, v);
}

std::string iso_time(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// What /api/tags and /api/ps say of a model: name, size, modified_at, digest, details.
json::object model_entry(const model_row& r) {
  std::error_code ec;
  const auto size = fs::file_size(r.spec.path, ec);
  // The file's modification time (file_clock -> system_clock through their offsets now).
  std::string modified;
  if (const auto mtime = fs::last_write_time(r.spec.path, ec); !ec) {
    const auto sys = std::chrono::system_clock::now() + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                                            mtime - fs::file_time_type::clock::now());
    modified = iso_time(std::chrono::system_clock::to_time_t(sys));
  }
  const std::string name = r.spec.id;
  // A stable id of the file as listed (Ollama's digest is the blob's SHA-256; spate does not hash files on listing).
  const std::string digest = std::to_string(std::hash<std::string>{}(r.spec.path + "|" + std::to_string(ec ? 0 : size)));
  json::object details;
  details["parent_model"] = r.spec.parent;
  details["format"] = "gguf";
  details["family"] = r.spec.arch;
  details["families"] = json::array{json::value(r.spec.arch)};
  details["parameter_size"] = "";
  details["quantization_level"] = r.spec.quantization;
  json::object e;
  e["name"] = name;
  e["model"] = name;
  e["modified_at"] = modified;
  e["size"] = ec ? int64_t{0} : static_cast<int64_t>(size);
  e["digest"] = digest;
  e["details"] = std::move(details);
  return e;
}

boost::asio::awaitable<void> handle_tags(server_context& ctx, http_exchange& ex, http_io& io, bool loaded_only) {
  json::array models;
  for (const model_row& r : ctx.models->list()) {
    if (r.status == model_status::error) continue;
    if (loaded_only && r.status != model_status::loaded) continue;
    json::object e = model_entry(r);
    if (loaded_only) {
      e["expires_at"] = ctx.opts.model_idle_unload_s > 0 && !r.spec.pinned
                            ? iso_time(std::time(nullptr) + static_cast<std::time_t>(ctx.opts.model_idle_unload_s))
                            : std::string("9999-12-31T23:59:59Z");
      e["size_vram"] = 0;
    }
    models.push_back(std::move(e));
  }
  auto res = make_json_response(http::status::ok, json::serialize(json::object{{"models", std::move(models)}}), ex.req.version());
  co_await io.write_response(ex, std::move(res));
}

boost::asio::awaitable<void> handle_show(server_context& ctx, http_exchange& ex, http_io& io) {
  const unsigned v = ex.req.version();
  boost::system::error_code ec;
  const json::value body = json::parse(ex.req.body(), ec);
  const json::value* m = !ec && body.is_object() ? body.as_object().if_contains("model") : nullptr;
  if (!m) m = !ec && body.is_object() ? body.as_object().if_contains("name") : nullptr;
  if (!m || !m->is_string() || m->as_string().empty()) {
    auto res = ollama_error(400, ec ? "malformed JSON: " + ec.message() : "model is required", v);
    co_await io.write_response(ex, std::move(res));
    co_return;
  }
  const std::string id = ollama_model_id(*ctx.models, m->as_string());
  model_acquired got = co_await acquire_model(ctx, id, nullptr, std::chrono::seconds(1));
  if (got.error) {
    auto res = make_api_error_response(k_shape, *got.error, v);
    co_await io.write_response(ex, std::move(res));
    co_return;
  }
  const api::served_model& sm = got.lease->model();
  const std::optional<model_row> row = ctx.models->find(id);
  const std::string arch = row ? row->spec.arch : "";
  json::array caps{"completion"};
  // Tool calls work with every chat template: the generic format describes the tools in a system message
  // (protocol/generation.cpp), a model format through the template; both are constrained (tool_grammar.h).
  if (sm.tmpl) caps.push_back("tools");
  if (sm.reasoning != api::reasoning_parser::none) caps.push_back("thinking");
  if (sm.pooling != pooling_type::none) caps.push_back("embedding");
  json::object info{{"general.architecture", arch}, {arch + ".context_length", sm.max_model_len}, {arch + ".embedding_length", sm.n_embd}};
  json::object out{{"modelfile", "# spate serves " + (row ? row->spec.path : id) + "\n"},
                   {"parameters", ""},
                   {"template", sm.tmpl ? sm.tmpl->source() : std::string()},
                   {"details", row ? model_entry(*row).at("details") : json::value(json::object())},
                   {"model_info", std::move(info)},
                   {"capabilities", std::move(caps)}};
  auto res = make_json_response(http::status::ok, json::serialize(out), v);
  co_await io.write_response(ex, std::move(res));
}

boost::asio::awaitable<void> handle_version(server_context&, http_exchange& ex, http_io& io) {
  auto res = make_json_response(http::status::ok, "{\"version\":\"0.1.0\"}", ex.req.version());
  co_await io.write_response(ex, std::move(res));
}

boost::asio::awaitable<void> handle_not_implemented(server_context&, http_exchange& ex, http_io& io) {
  auto res = ollama_error(501, "spate serves local GGUF files (--model, --models-dir): pulling, pushing, creating, copying and "
                               "deleting models is not supported",
                          ex.req.version());
  co_await io.write_response(ex, std::move(res));
}

}  // namespace

void add_ollama_routes(route_table& t, route_handler chat, route_handler generate) {
  using verb = http::verb;
  auto plain = [](auto handler) -> route_handler {
    return [handler](server_context& ctx, http_exchange& ex, http_io& io, const route_params&) { return handler(ctx, ex, io); };
  };
  auto embed = [](embed_api api) -> route_handler {
    return [api](server_context& ctx, http_exchange& ex, http_io& io, const route_params&) { return handle_embeddings(ctx, ex, io, api); };
  };
  auto tags = [](bool loaded) -> route_handler {
    return [loaded](server_context& ctx, http_exchange& ex, http_io& io, const route_params&) { return handle_tags(ctx, ex, io, loaded); };
  };
  t.add({{verb::post}, "/api/chat", route_auth::api_key, std::move(chat)});
  t.add({{verb::post}, "/api/generate", route_auth::api_key, std::move(generate)});
  t.add({{verb::post}, "/api/embed", route_auth::api_key, embed(embed_api::ollama)});
  t.add({{verb::post}, "/api/embeddings", route_auth::api_key, embed(embed_api::ollama_legacy)});
  t.add({{verb::get}, "/api/tags", route_auth::api_key, tags(false)});
  t.add({{verb::get}, "/api/ps", route_auth::api_key, tags(true)});
  t.add({{verb::post}, "/api/show", route_auth::api_key, plain(handle_show)});
  t.add({{verb::get}, "/api/version", route_auth::open, plain(handle_version)});
  for (const char* p : {"/api/pull", "/api/push", "/api/create", "/api/copy"})
    t.add({{verb::post}, p, route_auth::api_key, plain(handle_not_implemented)});
  t.add({{verb::delete_}, "/api/delete", route_auth::api_key, plain(handle_not_implemented)});
}

std::string ollama_model_id(const model_registry& models, std::string_view name) {
  constexpr std::string_view tag = ":latest";
  if (name.size() > tag.size() && name.ends_with(tag) && !models.knows(name)) {
    const std::string_view stem = name.substr(0, name.size() - tag.size());
    if (models.knows(stem)) return std::string(stem);
  }
  return std::string(name);
}

std::optional<api::api_error> ollama_check(const api::served_model& m, const api::ollama_extras& x) {
  if (x.num_ctx && *x.num_ctx > m.max_model_len) {
    return api::api_error{400, "options.num_ctx " + std::to_string(*x.num_ctx) + " exceeds the model's context of " + std::to_string(m.max_model_len) +
                                   " tokens (--max-model-len)",
                          "invalid_request_error", "options.num_ctx", ""};
  }
  return std::nullopt;
}

boost::asio::awaitable<void> ollama_load_answer(server_context& ctx, http_exchange& ex, http_io& io, const model_lease& m,
                                                const api::parsed_request& r, const api::ollama_extras& x) {
  const bool unload = x.keep_alive_s && *x.keep_alive_s == 0;
  if (x.keep_alive_s) ctx.models->set_keep_alive(m.id(), *x.keep_alive_s);  // 0: once this (and every other) request is done
  json::object o{{"model", m.id()}, {"created_at", iso_time(std::time(nullptr))}};
  if (r.ollama_kind == api::endpoint::ollama_chat) {
    o["message"] = json::object{{"role", "assistant"}, {"content", ""}};
  } else {
    o["response"] = "";
  }
  o["done_reason"] = unload ? "unload" : "load";
  o["done"] = true;
  auto res = make_json_response(http::status::ok, json::serialize(o), ex.req.version());
  co_await io.write_response(ex, std::move(res));
}

}  // namespace spate
