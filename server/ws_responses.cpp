#include "server/ws_responses.h"

#include <ctime>
#include <spdlog/spdlog.h>

#include "protocol/generation_format.h"
#include "protocol/ws_protocol.h"
#include "server/generation_pump.h"
#include "server/generation_submit.h"
#include "server/metrics.h"
#include "server/model_wait.h"

namespace spate {

namespace asio = boost::asio;

void ws_connection::send_error(const api::api_error& e) { send(ws_error_event(e, error_seq++)); }

void ws_connection::stop_response(server_context&) {
  if (lease) cancel_generation(*lease, ids);
  if (rs) rs->interrupt();
}

namespace {

// Marks the connection idle again after a response (or its refusal).
void end_response(ws_connection& st) {
  st.busy = false;
  st.ids.clear();
  st.rs.reset();
  st.lease.reset();
  st.wake.cancel();  // a draining writer closes once idle
}

// One response: its model (loading it when needed), the submission, the pump.
// A refusal becomes an error event.
asio::awaitable<void> ws_respond(server_context& ctx, std::shared_ptr<ws_connection> st, ws_create c,
                                 std::chrono::steady_clock::time_point t_arrival) {
  model_acquired got = co_await acquire_model(ctx, c.req.model, nullptr, std::chrono::seconds(1));
  std::optional<api::api_error> err = std::move(got.error);
  if (!err && st->closing) {
    end_response(*st);
    co_return;  // the client left while the model loaded
  }
  if (!err) err = ws_prepare(got.lease->model(), c);
  auto rs = request_stream::create(st->exec);
  std::vector<int64_t> ids;
  if (!err) err = submit_generation(ctx, *got.lease, c.gen, rs, ids);
  if (err) {
    (got.lease ? got.lease->metrics() : ctx.models->default_metrics()).count_rejected(rejection_reason(*err));
    st->send_error(*err);
    end_response(*st);
    co_return;
  }
  st->ids = ids;
  st->rs = rs;
  st->lease = got.lease;
  auto f = make_formatter(got.lease->model(), c.req, c.gen, [&ctx](const char* prefix) { return ctx.make_id(prefix); },
                          static_cast<int64_t>(std::time(nullptr)));
  ws_message_sink sink([st](std::string m) { st->send(std::move(m)); });
  generation_record rec;
  rec.t_arrival = t_arrival;
  rec.gen = &c.gen;
  if (co_await pump_generation(ctx, *got.lease, *rs, ids, *f, sink, rec)) {
    spdlog::info("{} WS response.create prompt_tokens={} completion_tokens={} ttft={:.3f}s finish_reason={}", st->request_id,
                 c.gen.prompt.size(), rec.completion_tokens, rec.ttft_s, rec.finish_reason);
  }
  end_response(*st);
}

}  // namespace

void ws_handle_message(server_context& ctx, const std::shared_ptr<ws_connection>& st, std::string_view msg,
                       std::chrono::steady_clock::time_point t_arrival) {
  ws_create c;
  if (auto err = ws_parse_event(msg, c)) {
    ctx.models->default_metrics().count_rejected(rejection_reason(*err));
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
  st->busy = true;
  ++st->n_live;
  asio::co_spawn(st->exec, ws_respond(ctx, st, std::move(c), t_arrival), [st](std::exception_ptr) { st->coroutine_ended(); });
}

}  // namespace spate
