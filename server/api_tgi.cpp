#include "server/api_tgi.h"

#include <boost/asio/this_coro.hpp>
#include <random>
#include <spdlog/spdlog.h>

#include "protocol/tgi_format.h"
#include "protocol/tgi_request.h"
#include "server/api_router.h"
#include "server/generation_pump.h"
#include "server/generation_submit.h"
#include "server/metrics.h"
#include "server/model_wait.h"
#include "server/request_stream.h"

namespace spate {

namespace asio = boost::asio;

namespace {

constexpr const char* k_version = "0.1.0";  // spate's (`spate version`)

http::response<http::string_body> tgi_response(const api::tgi_error& e, unsigned version) {
  auto res = make_json_response(static_cast<http::status>(e.status), api::tgi_error_body(e), version);
  if (e.status == 429 || e.status == 503) res.set(http::field::retry_after, "1");
  return res;
}

// The non-streamed answer: 200 with the formatter's body, or TGI's generation error (424, as TGI answers a failed generation).
class tgi_json_sink final : public generation_sink {
 public:
  tgi_json_sink(http_exchange& ex, http_io& io) : ex_(ex), io_(io) {}
  std::chrono::steady_clock::duration keepalive_interval() const override { return std::chrono::hours(24); }
  asio::awaitable<void> open() override { co_return; }
  asio::awaitable<void> send(stream_events) override { co_return; }
  asio::awaitable<void> keep_alive() override { co_return; }
  asio::awaitable<void> close(const generation_formatter& f) override {
    const final_body b = f.result();
    if (b.ok) {
      co_await io_.write_response(ex_, make_json_response(http::status::ok, b.body, ex_.req.version()));
    } else {
      co_await io_.write_response(ex_, tgi_response(api::tgi_error{424, b.error, "generation"}, ex_.req.version()));
    }
  }

 private:
  http_exchange& ex_;
  http_io& io_;
};


asio::awaitable<void> handle_tgi_generate(server_context& ctx, http_exchange& ex, http_io& io, api::tgi_route route) {
  const unsigned v = ex.req.version();
  api::tgi_request r;
  std::optional<api::tgi_error> err = api::parse_tgi_request(ex.req.body(), route, r);
  if (!err && !r.unknown_fields.empty()) {
    std::string names;
    for (const auto& f : r.unknown_fields) names += (names.empty() ? "" : ", ") + f;
    spdlog::debug("{}: ignoring unknown fields: {}", ex.request_id, names);
  }
  model_handle lease;
  if (!err) {
    model_acquired got = co_await acquire_model(ctx, r.model, nullptr, std::chrono::seconds(1));
    lease = std::move(got.lease);
    if (got.error) err = api::tgi_error_of(*got.error);
  }
  (lease ? lease->metrics() : ctx.models->default_metrics()).count_api_request("tgi");
  prepared_generation g;
  if (!err) err = api::prepare_tgi_generation(lease->model(), r, {ctx.opts.watermark_gamma, ctx.opts.watermark_delta}, g);
  // Sampling without a seed: one is drawn here, so that details can report it (as TGI does).
  if (!err && r.sampling && !g.params.seed) g.params.seed = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  auto stream = request_stream::create(co_await asio::this_coro::executor);
  std::vector<int64_t> ids;
  if (!err) {
    if (auto e = submit_generation(ctx, *lease, g, stream, ids)) {
      lease->metrics().count_rejected(rejection_reason(*e));
      err = api::tgi_error_of(*e);
    }
  }
  if (err) {
    ex.finish_reason = "rejected";
    co_await io.write_response(ex, tgi_response(*err, v));
    co_return;
  }
  ex.prompt_tokens = g.n_prompt_tokens();
  tgi_formatter formatter(lease->model(), r, g);
  disconnect_watch watch(*lease, io, stream, ids);
  generation_record rec;
  rec.t_arrival = ex.t_start;
  rec.gen = &g;
  struct copy_back {
    const generation_record& rec;
    http_exchange& ex;
    ~copy_back() {
      ex.ttft_s = rec.ttft_s;
      ex.completion_tokens = rec.completion_tokens;
      ex.finish_reason = rec.finish_reason;
    }
  } copy{rec, ex};
  if (r.stream) {
    sse_sink sink(ex, io, ctx.opts.sse_keepalive_s);
    co_await pump_generation(ctx, *lease, *stream, ids, formatter, sink, rec);
  } else {
    tgi_json_sink sink(ex, io);
    co_await pump_generation(ctx, *lease, *stream, ids, formatter, sink, rec);
  }
}

asio::awaitable<void> handle_tgi_info(server_context& ctx, http_exchange& ex, http_io& io) {
  const unsigned v = ex.req.version();
  model_acquired got = co_await acquire_model(ctx, "", nullptr, std::chrono::seconds(1));
  if (got.error) {
    co_await io.write_response(ex, tgi_response(api::tgi_error_of(*got.error), v));
    co_return;
  }
  const int32_t max_concurrent = got.lease->has_engine() ? got.lease->eng().max_queued_requests() : 1;
  const auto body = boost::json::serialize(tgi_info(got.lease->model(), max_concurrent, k_version));
  co_await io.write_response(ex, make_json_response(http::status::ok, body, v));
}

}  // namespace

void add_tgi_routes(route_table& t) {
  using verb = http::verb;
  auto gen = [](api::tgi_route route) -> route_handler {
    return [route](server_context& ctx, http_exchange& ex, http_io& io, const route_params&) { return handle_tgi_generate(ctx, ex, io, route); };
  };
  t.add({{verb::post}, "/generate", route_auth::api_key, gen(api::tgi_route::generate)});
  t.add({{verb::post}, "/generate_stream", route_auth::api_key, gen(api::tgi_route::generate_stream)});
  t.add({{verb::post}, "/", route_auth::api_key, gen(api::tgi_route::compat)});
  t.add({{verb::get}, "/info", route_auth::api_key,
         [](server_context& ctx, http_exchange& ex, http_io& io, const route_params&) { return handle_tgi_info(ctx, ex, io); }});
}

}  // namespace spate
