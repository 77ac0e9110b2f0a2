#include "server/api_router.h"

#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include "engine/engine_api.h"
#include "server/api_generate.h"
#include "server/api_tokenize.h"
#include "server/api_embeddings.h"
#include "server/api_profile.h"
#include "server/metrics.h"
#include "server/request_admission.h"
#include "server/ui_assets.h"

namespace spate {

namespace json = boost::json;

namespace {

const char* error_type_for(http::status st) {
  const unsigned s = static_cast<unsigned>(st);
  if (s == 401) return "authentication_error";
  if (s == 403) return "permission_error";
  if (s == 404) return "not_found_error";
  if (s == 429) return "rate_limit_error";
  if (s >= 500) return "server_error";
  return "invalid_request_error";
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
  // HEAD is answered wherever GET is (the header only; http_io sends no body).
  const bool get_or_head = only(http::verb::get) || only(http::verb::head);
  const char* allow = "GET, HEAD";  // the Allow header of a 405
  // The chat page is public (like /health): it asks for the API key itself.
  if (!ctx.opts.disable_ui && ui::is_ui_path(path)) {
    if (!get_or_head) goto wrong_method;
    co_await io.write_response(ex, ui::ui_response(path, v));
    co_return;
  }
  // The API key and the Origin were checked on the head (request_admission.h).
  if (ctx.draining.load() && !is_public_route(path, !ctx.opts.disable_ui)) {
    // A request on a keep-alive connection opened before the drain: no new
    // work; the connection closes after this answer.
    co_await io.write_response(ex, make_error_response(http::status::service_unavailable, "the server is shutting down", "", v));
    co_return;
  }
  if (path == "/health") {
    if (!get_or_head) goto wrong_method;
    co_await io.write_response(ex, make_json_response(http::status::ok, "{\"status\":\"ok\"}", v));
    co_return;
  }
  if (path == "/ready") {
    if (!get_or_head) goto wrong_method;
    if (ctx.ready.load() && !ctx.draining.load()) {
      co_await io.write_response(ex, make_json_response(http::status::ok, "{\"status\":\"ready\"}", v));
    } else {
      co_await io.write_response(ex, make_error_response(http::status::service_unavailable,
                                                         ctx.draining.load() ? "the server is shutting down" : "warming up", "not_ready", v));
    }
    co_return;
  }
  if (path == "/metrics") {
    if (!get_or_head) goto wrong_method;
    co_await handle_metrics(ctx, ex, io);
    co_return;
  }
  if (path == "/v1/models") {
    if (!get_or_head) goto wrong_method;
    co_await handle_models(ctx, ex, io);
    co_return;
  }
  if (path.starts_with("/v1/models/")) {
    if (!get_or_head) goto wrong_method;
    if (path.substr(11) != ctx.model.name) {
      co_await io.write_response(ex, make_error_response(http::status::not_found, "The model '" + std::string(path.substr(11)) + "' does not exist",
                                                         "model_not_found", v, "model"));
      co_return;
    }
    co_await io.write_response(ex, make_json_response(http::status::ok, json::serialize(model_object(ctx)), v));
    co_return;
  }
  if (path == "/v1/completions" || path == "/v1/chat/completions" || path == "/v1/responses") {
    if (!only(http::verb::post)) {
      allow = "POST";
      goto wrong_method;
    }
    const auto kind = path == "/v1/completions"        ? api::endpoint::completions
                      : path == "/v1/chat/completions" ? api::endpoint::chat_completions
                                                       : api::endpoint::responses;
    co_await handle_generate(ctx, ex, io, kind);
    co_return;
  }
  if (path == "/v1/embeddings") {
    if (!only(http::verb::post)) {
      allow = "POST";
      goto wrong_method;
    }
    co_await handle_embeddings(ctx, ex, io);
    co_return;
  }
  if (path == "/start_profile" || path == "/stop_profile") {
    if (!only(http::verb::post)) {
      allow = "POST";
      goto wrong_method;
    }
    co_await handle_profile(ctx, ex, io, path == "/start_profile");
    co_return;
  }
  if (path == "/tokenize" || path == "/detokenize") {
    if (!only(http::verb::post)) {
      allow = "POST";
      goto wrong_method;
    }
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
  res.set(http::field::allow, allow);
  co_await io.write_response(ex, std::move(res));
}

}  // namespace spate
