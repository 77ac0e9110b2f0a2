#include "server/api_generate.h"

#include <boost/asio/this_coro.hpp>
#include <ctime>
#include <spdlog/spdlog.h>

#include "protocol/generation_format.h"
#include "server/api_router.h"
#include "server/generation_pump.h"
#include "server/generation_submit.h"
#include "server/metrics.h"
#include "server/request_stream.h"

namespace spate {

namespace asio = boost::asio;

namespace {

// While generating, a client that closes the connection cancels the engine
// requests and interrupts the stream (the pump then ends). Strand only.
class disconnect_watch {
 public:
  disconnect_watch(server_context& ctx, http_io& io, std::shared_ptr<request_stream> stream, std::vector<int64_t> ids) : io_(io) {
    io_.watch_disconnect([&ctx, stream = std::move(stream), ids = std::move(ids)] {
      cancel_generation(ctx, ids);
      stream->interrupt();
    });
  }
  ~disconnect_watch() { io_.unwatch(); }
  disconnect_watch(const disconnect_watch&) = delete;
  disconnect_watch& operator=(const disconnect_watch&) = delete;

 private:
  http_io& io_;
};

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

// Parse, model check, validation and preparation of the body.
std::optional<api::api_error> prepare_request(server_context& ctx, http_exchange& ex, api::endpoint kind, api::parsed_request& r,
                                              prepared_generation& g) {
  std::optional<api::api_error> err = api::parse_request(kind, ex.req.body(), r);
  if (!err && !r.unknown_fields.empty()) {
    std::string names;
    for (const auto& f : r.unknown_fields) names += (names.empty() ? "" : ", ") + f;
    spdlog::debug("{}: ignoring unknown fields: {}", ex.request_id, names);
  }
  if (!err && !r.model.empty() && r.model != ctx.model.name) {
    err = api::api_error{404, "The model '" + r.model + "' does not exist", "not_found_error", "model", "model_not_found"};
  }
  if (!err) err = api::validate_for_model(r, ctx.model.n_vocab);
  if (!err) err = prepare_generation(ctx.model, r, g);
  return err;
}

}  // namespace

asio::awaitable<void> handle_generate(server_context& ctx, http_exchange& ex, http_io& io, api::endpoint kind) {
  api::parsed_request r;
  prepared_generation g;
  std::optional<api::api_error> err = prepare_request(ctx, ex, kind, r, g);
  auto stream = request_stream::create(co_await asio::this_coro::executor);
  std::vector<int64_t> ids;
  if (!err) err = submit_generation(ctx, g, stream, ids);
  if (err) {
    ctx.metrics.count_rejected(rejection_reason(*err));
    ex.finish_reason = "rejected";
    co_await io.write_response(ex, make_error_response(static_cast<http::status>(err->status), err->message, err->code,
                                                       ex.req.version(), err->param));
    co_return;
  }
  ex.prompt_tokens = g.n_prompt_tokens();
  auto formatter = make_formatter(ctx.model, r, g, [&ctx](const char* prefix) { return ctx.make_id(prefix); },
                                  static_cast<int64_t>(std::time(nullptr)));
  disconnect_watch watch(ctx, io, stream, ids);
  generation_record rec;
  rec.t_arrival = ex.t_start;
  rec.gen = &g;
  record_to_exchange copy_back{rec, ex};
  if (r.stream) {
    sse_sink sink(ex, io, ctx.opts.sse_keepalive_s);
    co_await pump_generation(ctx, *stream, ids, *formatter, sink, rec);
  } else {
    json_body_sink sink(ex, io);
    co_await pump_generation(ctx, *stream, ids, *formatter, sink, rec);
  }
}

}  // namespace spate
