#include "server/api_router.h"

#include <openssl/crypto.h>

#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include "engine/engine_api.h"
#include "server/api_generate.h"
#include "server/api_tokenize.h"
#include "server/api_embeddings.h"
#include "server/api_profile.h"
#include "server/metrics.h"
#include "server/ui_assets.h"
#include "server/ws_subprotocol.h"

namespace spate {

namespace json = boost::json;

namespace {

const char* error_type_for(http::status st) {
  const unsigned s = static_cast<unsigned>(st);
  if (s == 401) return "authentication_error";
  if (s == 404) return "not_found_error";
  if (s == 429) return "rate_limit_error";
  if (s >= 500) return "server_error";
  return "invalid_request_error";
}

bool requires_auth(std::string_view target) {
  // Operational endpoints stay open (probes and scrapers carry no key).
  return !(target == "/health" || target == "/ready" || target == "/metrics");
}

std::string_view path_of(std::string_view target) {
  const auto q = target.find('?');
  return q == std::string_view::npos ? target : target.substr(0, q);
}

json::object model_object(const server_context& ctx) {
  json::object m;
  m["id"] = ctx.model.name;
  m["object"] = "model";
  m["created"] = ctx.created_unix_s;
  m["owned_by"] = "spate";
  m["root"] = ctx.model.name;
  m["max_model_len"] = ctx.model.max_model_len;
  return m;
}

boost::asio::awaitable<void> handle_models(server_context& ctx, http_exchange& ex, http_io& io) {
  json::object body;
  body["object"] = "list";
  body["data"] = json::array{model_object(ctx)};
  co_await io.write_response(ex, make_json_response(http::status::ok, json::serialize(body), ex.req.version()));
}

boost::asio::awaitable<void> handle_metrics(server_context& ctx, http_exchange& ex, http_io& io) {
  ctx.metrics.update_from_engine(ctx.eng.stats());
  http::response<http::string_body> res{http::status::ok, ex.req.version()};
  res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
  res.body() = ctx.metrics.render_prometheus();
  co_await io.write_response(ex, std::move(res));
}

}  // namespace

http::response<http::string_body> make_json_response(http::status st, std::string body, unsigned version) {
  http::response<http::string_body> res{st, version};
  res.set(http::field::content_type, "application/json");
  res.body() = std::move(body);
  return res;
}

http::response<http::string_body> make_error_response(http::status st, std::string_view message, std::string_view code,
                                                      unsigned version, std::string_view param) {
  json::object e;
  e["message"] = message;
  e["type"] = error_type_for(st);
  e["param"] = param.empty() ? json::value(nullptr) : json::value(param);
  e["code"] = code.empty() ? json::value(nullptr) : json::value(code);
  json::object o;
  o["error"] = std::move(e);
  auto res = make_json_response(st, json::serialize(o), version);
  if (st == http::status::too_many_requests || st == http::status::service_unavailable) res.set(http::field::retry_after, "1");
  if (st == http::status::unauthorized) res.set(http::field::www_authenticate, "Bearer");
  return res;
}

namespace {

// Constant time in the keys' content; the length check leaks only the length.
bool key_accepted(const std::vector<std::string>& keys, std::string_view v) {
  bool ok = false;
  for (const auto& key : keys) {
    const bool same = v.size() == key.size() && CRYPTO_memcmp(v.data(), key.data(), key.size()) == 0;
    ok = ok || same;
  }
  return ok;
}

}  // namespace

bool authorized(const server_context& ctx, const http::request<http::string_body>& req) {
  const auto keys = ctx.api_keys();
  if (keys->empty()) return true;
  const auto it = req.find(http::field::authorization);
  if (it == req.end()) return false;
  std::string_view v = it->value();
  constexpr std::string_view bearer = "Bearer ";
  if (v.size() < bearer.size() || !std::equal(bearer.begin(), bearer.end(), v.begin(), [](char a, char b) {
        return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
      })) {
    return false;
  }
  v.remove_prefix(bearer.size());
  return key_accepted(*keys, v);
}

bool authorized_ws(const server_context& ctx, const http::request<http::string_body>& req) {
  if (authorized(ctx, req)) return true;
  const auto it = req.find(http::field::sec_websocket_protocol);
  if (it == req.end()) return false;
  const auto key = subprotocol_api_key(it->value());
  return key && key_accepted(*ctx.api_keys(), *key);
}

bool is_sane_request_id(std::string_view v) {
  if (v.empty() || v.size() > 128) return false;
  for (char c : v) if (c < 0x21 || c > 0x7e) return false;
  return true;
}

void log_access(const server_context& ctx, const http_exchange& ex) {
  const double dur_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - ex.t_start).count();
  static auto access = [] {
    auto l = spdlog::default_logger()->clone("access");
    return l;
  }();
  const std::string target(ex.req.target());
  access->info("{} {} {} {} prompt_tokens={} completion_tokens={} ttft={} duration={:.3f}s finish_reason={}", ex.request_id,
               ex.req.method_string().empty() ? "-" : std::string(ex.req.method_string()), target.empty() ? "-" : target,
               ex.status, ex.prompt_tokens, ex.completion_tokens,
               ex.ttft_s >= 0 ? fmt::format("{:.3f}s", ex.ttft_s) : std::string("-"), dur_s,
               ex.finish_reason.empty() ? "-" : ex.finish_reason);
}

std::optional<http::response<http::string_body>> check_ws_upgrade(server_context& ctx, http_exchange& ex) {
  const unsigned v = ex.req.version();
  if (path_of(ex.req.target()) != "/v1/responses") {
    return make_error_response(http::status::not_found, "WebSocket is served on GET /v1/responses only", "", v);
  }
  if (!authorized_ws(ctx, ex.req)) return make_error_response(http::status::unauthorized, "missing or invalid API key", "invalid_api_key", v);
  if (ctx.draining.load()) return make_error_response(http::status::service_unavailable, "the server is shutting down", "", v);
  return std::nullopt;
}

boost::asio::awaitable<void> handle_http_request(server_context& ctx, http_exchange& ex, http_io& io) {
  const unsigned v = ex.req.version();
  const std::string_view path = path_of(ex.req.target());
  const auto method = ex.req.method();
  // CORS preflights come before authentication: browsers send them without credentials.
  if (cors_policy::is_preflight(ex.req.base())) {
    co_await io.write_response(ex, ctx.cors.preflight(ex.req.base()));
    co_return;
  }
  if (method == http::verb::options) {
    http::response<http::string_body> res{http::status::no_content, v};
    res.set(http::field::allow, "GET, HEAD, POST, OPTIONS");
    co_await io.write_response(ex, std::move(res));
    co_return;
  }
  auto only = [&](http::verb want) { return method == want; };
  // The chat page is public (like /health): it asks for the API key itself.
  if (!ctx.opts.disable_ui && ui::is_ui_path(path)) {
    if (!only(http::verb::get)) goto wrong_method;
    co_await io.write_response(ex, ui::ui_response(path, v));
    co_return;
  }
  if (requires_auth(path) && !authorized(ctx, ex.req)) {
    co_await io.write_response(ex, make_error_response(http::status::unauthorized, "missing or invalid API key", "invalid_api_key", v));
    co_return;
  }
  if (ctx.draining.load() && requires_auth(path)) {
    // A request on a keep-alive connection opened before the drain: no new
    // work; the connection closes after this answer.
    co_await io.write_response(ex, make_error_response(http::status::service_unavailable, "the server is shutting down", "", v));
    co_return;
  }
  if (path == "/health") {
    if (!only(http::verb::get) && !only(http::verb::head)) goto wrong_method;
    co_await io.write_response(ex, make_json_response(http::status::ok, "{\"status\":\"ok\"}", v));
    co_return;
  }
  if (path == "/ready") {
    if (!only(http::verb::get) && !only(http::verb::head)) goto wrong_method;
    if (ctx.ready.load() && !ctx.draining.load()) {
      co_await io.write_response(ex, make_json_response(http::status::ok, "{\"status\":\"ready\"}", v));
    } else {
      co_await io.write_response(ex, make_error_response(http::status::service_unavailable,
                                                         ctx.draining.load() ? "the server is shutting down" : "warming up", "not_ready", v));
    }
    co_return;
  }
  if (path == "/metrics") {
    if (!only(http::verb::get)) goto wrong_method;
    co_await handle_metrics(ctx, ex, io);
    co_return;
  }
  if (path == "/v1/models") {
    if (!only(http::verb::get)) goto wrong_method;
    co_await handle_models(ctx, ex, io);
    co_return;
  }
  if (path.starts_with("/v1/models/")) {
    if (!only(http::verb::get)) goto wrong_method;
    if (path.substr(11) != ctx.model.name) {
      co_await io.write_response(ex, make_error_response(http::status::not_found, "The model '" + std::string(path.substr(11)) + "' does not exist",
                                                         "model_not_found", v, "model"));
      co_return;
    }
    co_await io.write_response(ex, make_json_response(http::status::ok, json::serialize(model_object(ctx)), v));
    co_return;
  }
  if (path == "/v1/completions" || path == "/v1/chat/completions" || path == "/v1/responses") {
    if (!only(http::verb::post)) goto wrong_method;
    const auto kind = path == "/v1/completions"        ? api::endpoint::completions
                      : path == "/v1/chat/completions" ? api::endpoint::chat_completions
                                                       : api::endpoint::responses;
    co_await handle_generate(ctx, ex, io, kind);
    co_return;
  }
  if (path == "/v1/embeddings") {
    if (!only(http::verb::post)) goto wrong_method;
    co_await handle_embeddings(ctx, ex, io);
    co_return;
  }
  if (path == "/start_profile" || path == "/stop_profile") {
    if (!only(http::verb::post)) goto wrong_method;
    co_await handle_profile(ctx, ex, io, path == "/start_profile");
    co_return;
  }
  if (path == "/tokenize" || path == "/detokenize") {
    if (!only(http::verb::post)) goto wrong_method;
    co_await handle_tokenize(ctx, ex, io, path == "/tokenize");
    co_return;
  }
  co_await io.write_response(ex, make_error_response(http::status::not_found, "no route for " + std::string(ex.req.method_string()) + " " +
                                                                                  std::string(path),
                                                     "not_found", v));
  co_return;
wrong_method:
  auto res = make_error_response(http::status::method_not_allowed,
                                 "method " + std::string(ex.req.method_string()) + " is not allowed on " + std::string(path), "", v);
  co_await io.write_response(ex, std::move(res));
}

}  // namespace spate
