#include "server/api_router.h"

#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include "engine/engine_api.h"
#include "protocol/anthropic_request.h"
#include "protocol/ollama_request.h"
#include "server/api_ollama.h"
#include "server/api_generate.h"
#include "server/api_models.h"
#include "server/api_tokenize.h"
#include "server/api_embeddings.h"
#include "server/api_profile.h"
#include "server/api_tgi.h"
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

boost::asio::awaitable<void> handle_metrics(server_context& ctx, http_exchange& ex, http_io& io) {
  http::response<http::string_body> res{http::status::ok, ex.req.version()};
  res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
  res.body() = server_metrics::render_all(ctx.models->metrics_for_scrape());
  co_await io.write_response(ex, std::move(res));
}

boost::asio::awaitable<void> handle_health(server_context&, http_exchange& ex, http_io& io) {
  co_await io.write_response(ex, make_json_response(http::status::ok, "{\"status\":\"ok\"}", ex.req.version()));
}

boost::asio::awaitable<void> handle_ready(server_context& ctx, http_exchange& ex, http_io& io) {
  const unsigned v = ex.req.version();
  if (ctx.ready.load() && !ctx.draining.load() && ctx.models->pinned_loaded()) {
    co_await io.write_response(ex, make_json_response(http::status::ok, "{\"status\":\"ready\"}", v));
    co_return;
  }
  co_await io.write_response(ex, make_error_response(http::status::service_unavailable,
                                                     ctx.draining.load() ? "the server is shutting down" : "warming up", "not_ready", v));
}

boost::asio::awaitable<void> handle_ui(server_context&, http_exchange& ex, http_io& io, const route_params&) {
  co_await io.write_response(ex, ui::ui_response(path_of(ex.req.target()), ex.req.version()));
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

http::response<http::string_body> make_api_error_response(api::endpoint api, const api::api_error& e, unsigned version) {
  const bool ollama = api == api::endpoint::ollama_chat || api == api::endpoint::ollama_generate;
  if (!ollama && api != api::endpoint::messages) {
    return make_error_response(static_cast<http::status>(e.status), e.message, e.code, version, e.param);
  }
  auto res = make_json_response(static_cast<http::status>(e.status),
                                ollama ? api::ollama_error_body(e.message) : api::anthropic_error_body(e.status, e.message), version);
  if (e.status == 429 || e.status == 503) res.set(http::field::retry_after, "1");
  if (e.status == 401) res.set(http::field::www_authenticate, "Bearer");
  return res;
}

api::endpoint api_of_path(std::string_view path) {
  if (path.starts_with("/api/")) return api::endpoint::ollama_chat;
  return path == "/v1/messages" || path.starts_with("/v1/messages/") ? api::endpoint::messages : api::endpoint::chat_completions;
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
  // A credential a client put in the query never reaches the log (request_admission.h).
  const std::string target = redact_target(ex.req.target(), *ctx.api_keys());
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

route_table api_routes(bool ui_enabled) {
  using verb = http::verb;
  route_table t;
  auto generate = [](api::endpoint kind) -> route_handler {
    return [kind](server_context& ctx, http_exchange& ex, http_io& io, const route_params&) { return handle_generate(ctx, ex, io, kind); };
  };
  auto flag = [](auto handler, bool on) -> route_handler {
    return [handler, on](server_context& ctx, http_exchange& ex, http_io& io, const route_params&) { return handler(ctx, ex, io, on); };
  };
  auto plain = [](auto handler) -> route_handler {
    return [handler](server_context& ctx, http_exchange& ex, http_io& io, const route_params&) { return handler(ctx, ex, io); };
  };
  if (ui_enabled) {
    // The chat page is public (like /health): it asks for the API key itself.
    for (const char* p : {"/", "/index.html", "/ui/{file...}"}) t.add({{verb::get}, p, route_auth::open, handle_ui});
  }
  t.add({{verb::get}, "/health", route_auth::open, plain(handle_health)});
  t.add({{verb::get}, "/ready", route_auth::open, plain(handle_ready)});
  t.add({{verb::get}, "/metrics", route_auth::open, plain(handle_metrics)});
  // Anthropic's clients call /v1/models and /v1/messages* with the key in x-api-key.
  t.add({{verb::get}, "/v1/models", route_auth::api_key_anthropic, plain(handle_models)});
  t.add({{verb::get}, "/models", route_auth::api_key, plain(handle_models)});
  t.add({{verb::get}, "/v1/models/{id...}", route_auth::api_key_anthropic, handle_model});
  t.add({{verb::post}, "/models/load", route_auth::api_key, flag(handle_model_load, true)});
  t.add({{verb::post}, "/models/unload", route_auth::api_key, flag(handle_model_load, false)});
  t.add({{verb::post}, "/v1/load_lora_adapter", route_auth::api_key, flag(handle_lora_adapter, true)});
  t.add({{verb::post}, "/v1/unload_lora_adapter", route_auth::api_key, flag(handle_lora_adapter, false)});
  t.add({{verb::post}, "/v1/completions", route_auth::api_key, generate(api::endpoint::completions)});
  t.add({{verb::post}, "/v1/chat/completions", route_auth::api_key, generate(api::endpoint::chat_completions)});
  t.add({{verb::post}, "/v1/responses", route_auth::api_key, generate(api::endpoint::responses)});
  t.add({{verb::post}, "/v1/messages", route_auth::api_key_anthropic, generate(api::endpoint::messages)});
  t.add({{verb::post}, "/v1/messages/count_tokens", route_auth::api_key_anthropic, plain(handle_count_tokens)});
  add_ollama_routes(t, generate(api::endpoint::ollama_chat), generate(api::endpoint::ollama_generate));
  t.add({{verb::post}, "/v1/embeddings", route_auth::api_key, [](server_context& ctx, http_exchange& ex, http_io& io, const route_params&) { return handle_embeddings(ctx, ex, io); }});
  t.add({{verb::post}, "/start_profile", route_auth::api_key, flag(handle_profile, true)});
  t.add({{verb::post}, "/stop_profile", route_auth::api_key, flag(handle_profile, false)});
  t.add({{verb::post}, "/tokenize", route_auth::api_key, flag(handle_tokenize, true)});
  t.add({{verb::post}, "/detokenize", route_auth::api_key, flag(handle_tokenize, false)});
  add_tgi_routes(t);
  return t;
}

boost::asio::awaitable<void> handle_http_request(server_context& ctx, http_exchange& ex, http_io& io) {
  const unsigned v = ex.req.version();
  const std::string_view path = path_of(ex.req.target());
  // CORS preflights come before authentication: browsers send them without credentials.
  if (cors_policy::is_preflight(ex.req.base())) {
    co_await io.write_response(ex, ctx.cors.preflight(ex.req.base()));
    co_return;
  }
  // Any other OPTIONS, on any path: the methods the server answers at all.
  if (ex.req.method() == http::verb::options) {
    http::response<http::string_body> res{http::status::no_content, v};
    res.set(http::field::allow, "GET, HEAD, POST, OPTIONS");
    co_await io.write_response(ex, std::move(res));
    co_return;
  }
  // The API key and the Origin were checked on the head (request_admission.h).
  const route_match m = ctx.routes.match(ex.req.method(), path);
  // Errors before a handler runs, in the shape of the API the path belongs to.
  const api::endpoint shape = api_of_path(path);
  if (ctx.draining.load() && !m.is_public) {
    // A request on a keep-alive connection opened before the drain: no new
    // work; the connection closes after this answer.
    const api::api_error e{503, "the server is shutting down", "", "", ""};
    co_await io.write_response(ex, make_api_error_response(shape, e, v));
    co_return;
  }
  switch (m.result) {
    case route_match::outcome::found:
      co_await m.found->handler(ctx, ex, io, m.params);
      co_return;
    case route_match::outcome::method_not_allowed: {
      const api::api_error e{405, "method " + std::string(ex.req.method_string()) + " is not allowed on " + std::string(path), "", "", ""};
      auto res = make_api_error_response(shape, e, v);
      res.set(http::field::allow, m.allow);
      co_await io.write_response(ex, std::move(res));
      co_return;
    }
    case route_match::outcome::not_found:
      break;
  }
  const api::api_error e{404, "no route for " + std::string(ex.req.method_string()) + " " + std::string(path), "", "", "not_found"};
  co_await io.write_response(ex, make_api_error_response(shape, e, v));
}

}  // namespace spate
