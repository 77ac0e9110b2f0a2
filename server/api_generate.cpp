#include "server/api_generate.h"

#include <boost/asio/this_coro.hpp>
#include <ctime>
#include <spdlog/spdlog.h>

#include "protocol/anthropic_request.h"
#include "protocol/ollama_request.h"
#include "server/api_ollama.h"
#include "protocol/generation_format.h"
#include "server/api_router.h"
#include "server/generation_pump.h"
#include "server/generation_submit.h"
#include "server/metrics.h"
#include "server/model_wait.h"
#include "server/request_stream.h"

namespace spate {

namespace asio = boost::asio;

namespace {


// Copies the pump's record into the access-log record, also when a write threw.
struct record_to_exchange {
  const generation_record& rec;
  http_exchange& ex;
  ~record_to_exchange() {
    ex.ttft_s = rec.ttft_s;
    ex.completion_tokens = rec.completion_tokens;
    ex.finish_reason = rec.finish_reason;
  }
};

// Validation and preparation of a parsed body against its model.
std::optional<api::api_error> prepare_request(const model_lease& m, api::parsed_request& r, prepared_generation& g) {
  std::optional<api::api_error> err = api::validate_for_model(r, m.model().n_vocab);
  if (!err) err = prepare_generation(m.model(), r, g);
  return err;
}

// The body of the API's route, parsed into r (Ollama's extras into ollama).
std::optional<api::api_error> parse_body(api::endpoint kind, std::string_view body, api::parsed_request& r, api::ollama_extras& ollama) {
  switch (kind) {
    case api::endpoint::messages: return api::parse_messages_request(body, r);
    case api::endpoint::ollama_chat:
    case api::endpoint::ollama_generate: return api::parse_ollama_request(kind, body, r, ollama);
    default: return api::parse_request(kind, body, r);
  }
}

const char* api_label(api::endpoint kind) {
  if (kind == api::endpoint::messages) return "anthropic";
  if (kind == api::endpoint::ollama_chat || kind == api::endpoint::ollama_generate) return "ollama";
  return "openai";
}

}  // namespace

asio::awaitable<void> handle_generate(server_context& ctx, http_exchange& ex, http_io& io, api::endpoint kind) {
  api::parsed_request r;
  prepared_generation g;
  api::ollama_extras ollama;
  std::optional<api::api_error> err = parse_body(kind, ex.req.body(), r, ollama);
  if (!err && r.ollama_kind) r.model = ollama_model_id(*ctx.models, r.model);  // "NAME:latest"
  if (!err && !r.unknown_fields.empty()) {
    std::string names;
    for (const auto& f : r.unknown_fields) names += (names.empty() ? "" : ", ") + f;
    spdlog::debug("{}: ignoring unknown fields: {}", ex.request_id, names);
  }
  // A stream opens while its model loads, so that keep-alives flow (not NDJSON's: it has none).
  sse_sink sse(ex, io, ctx.opts.sse_keepalive_s, kind);
  model_handle lease;
  if (!err) {
    keep_alive_fn keep_alive;
    if (r.stream && !r.ollama_kind) keep_alive = [&sse]() -> asio::awaitable<void> {
      co_await sse.open();
      co_await sse.keep_alive();
    };
    const auto t_load = std::chrono::steady_clock::now();
    model_acquired got = co_await acquire_model(ctx, r.model, keep_alive ? &keep_alive : nullptr, sse.keepalive_interval());
    r.load_duration_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t_load).count();
    lease = std::move(got.lease);
    err = std::move(got.error);
  }
  (lease ? lease->metrics() : ctx.models->default_metrics()).count_api_request(api_label(kind));
  if (!err && r.ollama_kind) {
    err = ollama_check(lease->model(), ollama);
    if (!err && ollama.empty_prompt) {  // Ollama's way to load (or, keep_alive 0, unload) a model
      co_await ollama_load_answer(ctx, ex, io, *lease, r, ollama);
      co_return;
    }
  }
  if (!err) err = prepare_request(*lease, r, g);
  auto stream = request_stream::create(co_await asio::this_coro::executor);
  std::vector<int64_t> ids;
  if (!err) err = submit_generation(ctx, *lease, g, stream, ids);
  if (err) {
    (lease ? lease->metrics() : ctx.models->default_metrics()).count_rejected(rejection_reason(*err));
    ex.finish_reason = "rejected";
    if (sse.opened()) {
      co_await sse.fail(*err);
    } else {
      auto res = make_api_error_response(kind, *err, ex.req.version());
      co_await io.write_response(ex, std::move(res));
    }
    co_return;
  }
  ex.prompt_tokens = g.n_prompt_tokens();
  auto formatter = make_formatter(lease->model(), r, g, [&ctx](const char* prefix) { return ctx.make_id(prefix); },
                                  static_cast<int64_t>(std::time(nullptr)));
  disconnect_watch watch(*lease, io, stream, ids);
  generation_record rec;
  rec.t_arrival = ex.t_start;
  rec.gen = &g;
  record_to_exchange copy_back{rec, ex};
  if (r.stream && r.ollama_kind) {
    ndjson_sink sink(ex, io);
    co_await pump_generation(ctx, *lease, *stream, ids, *formatter, sink, rec);
  } else if (r.stream) {
    co_await pump_generation(ctx, *lease, *stream, ids, *formatter, sse, rec);
  } else {
    json_body_sink sink(ex, io, kind);
    co_await pump_generation(ctx, *lease, *stream, ids, *formatter, sink, rec);
  }
  if (ollama.keep_alive_s) ctx.models->set_keep_alive(lease->id(), *ollama.keep_alive_s);  // 0: once its requests finish
}

asio::awaitable<void> handle_count_tokens(server_context& ctx, http_exchange& ex, http_io& io) {
  constexpr auto kind = api::endpoint::messages;
  api::parsed_request r;
  prepared_generation g;
  std::optional<api::api_error> err = api::parse_messages_request(ex.req.body(), r, /*count_only=*/true);
  model_handle lease;
  if (!err) {
    model_acquired got = co_await acquire_model(ctx, r.model, nullptr, std::chrono::seconds(1));
    lease = std::move(got.lease);
    err = std::move(got.error);
  }
  if (!err) err = prepare_request(*lease, r, g);
  if (err) {
    co_await io.write_response(ex, make_api_error_response(kind, *err, ex.req.version()));
    co_return;
  }
  auto res = make_json_response(http::status::ok, "{\"input_tokens\":" + std::to_string(g.n_prompt_tokens()) + "}", ex.req.version());
  co_await io.write_response(ex, std::move(res));
}

}  // namespace spate
