#include "server/ws_responses.h"

#include <ctime>
#include <spdlog/spdlog.h>

#include "protocol/generation_format.h"
#include "protocol/ws_protocol.h"
#include "server/generation_pump.h"
#include "server/generation_submit.h"
#include "server/metrics.h"

namespace spate {

namespace asio = boost::asio;

void ws_connection::send_error(const api::api_error& e) { send(ws_error_event(e, error_seq++)); }

void ws_connection::stop_response(server_context& ctx) {
  cancel_generation(ctx, ids);
  if (rs) rs->interrupt();
}

namespace {

// The pump of one response; ends by marking the connection idle again.
asio::awaitable<void> ws_pump(server_context& ctx, std::shared_ptr<ws_connection> st, std::shared_ptr<request_stream> rs,
                              std::vector<int64_t> ids, ws_create c, std::chrono::steady_clock::time_point t_arrival) {
  auto f = make_formatter(ctx.model, c.req, c.gen, [&ctx](const char* prefix) { return ctx.make_id(prefix); },
                          static_cast<int64_t>(std::time(nullptr)));
  ws_message_sink sink([st](std::string m) { st->send(std::move(m)); });
  generation_record rec;
  rec.t_arrival = t_arrival;
  rec.gen = &c.gen;
  if (co_await pump_generation(ctx, *rs, ids, *f, sink, rec)) {
    spdlog::info("{} WS response.create prompt_tokens={} completion_tokens={} ttft={:.3f}s finish_reason={}", st->request_id,
                 c.gen.prompt.size(), rec.completion_tokens, rec.ttft_s, rec.finish_reason);
  }
  st->busy = false;
  st->ids.clear();
  st->rs.reset();
  st->wake.cancel();  // a draining writer closes once idle
}

// Submits c and spawns its pump; a refusal becomes an error event.
void start_response(server_context& ctx, const std::shared_ptr<ws_connection>& st, ws_create&& c,
                    std::chrono::steady_clock::time_point t_arrival) {
  auto rs = request_stream::create(st->exec);
  std::vector<int64_t> ids;
  if (auto err = submit_generation(ctx, c.gen, rs, ids)) {
    ctx.metrics.count_rejected(rejection_reason(*err));
    st->send_error(*err);
    return;
  }
  st->busy = true;
  st->ids = ids;
  st->rs = rs;
  ++st->n_live;
  asio::co_spawn(st->exec, ws_pump(ctx, st, rs, std::move(ids), std::move(c), t_arrival),
                 [st](std::exception_ptr) { st->coroutine_ended(); });
}

}  // namespace

void ws_handle_message(server_context& ctx, const std::shared_ptr<ws_connection>& st, std::string_view msg,
                       std::chrono::steady_clock::time_point t_arrival) {
  ws_create c;
  if (auto err = ws_parse_message(ctx.model, msg, c)) {
    ctx.metrics.count_rejected(rejection_reason(*err));
    st->send_error(*err);
    return;
  }
  if (st->busy) {
    st->send_error({400, "a response is already in progress on this connection; wait for it to complete", "invalid_request_error", "",
                    "response_in_progress"});
    return;
  }
  if (ctx.draining.load() || st->drain) {
    // Like HTTP's 503 on a keep-alive connection during the drain: refused, then closed (1001).
    st->send_error({503, "the server is shutting down", "server_error", "", "shutting_down"});
    st->begin_drain();
    return;
  }
  start_response(ctx, st, std::move(c), t_arrival);
}

}  // namespace spate
