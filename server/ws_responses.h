// GET /v1/responses upgraded to a WebSocket: the Responses API WebSocket mode.
//
// Three coroutines share the connection's strand:
//   reader  (this function): reads client messages; starts responses; on close
//           or error cancels the running response and waits for the others;
//   writer: the only one that writes; drains the outgoing queue in order;
//   pump:   one per running response: pump_generation (generation_pump.h)
//           with a ws_message_sink that queues the events for the writer.
// One response runs at a time; response.create while one runs gets an error
// event. Limits: --max-ws-message-bytes per message (bigger: close 1009),
// --idle-timeout with keep-alive pings.
#pragma once

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <ctime>
#include <deque>
#include <memory>
#include <spdlog/spdlog.h>

#include "server/api_router.h"
#include "server/generation_submit.h"
#include "server/http_io.h"
#include "server/metrics.h"
#include "protocol/generation_format.h"
#include "protocol/ws_protocol.h"
#include "server/generation_pump.h"
#include "server/request_stream.h"
#include "server/server_context.h"

namespace spate {

template <class Stream>
boost::asio::awaitable<void> run_ws_responses(server_context& ctx, Stream stream, http_exchange ex) {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  namespace websocket = beast::websocket;
  using clock_type = std::chrono::steady_clock;

  struct conn_state {
    explicit conn_state(asio::any_io_executor ex) : wake(ex), all_done(ex) {}
    std::deque<std::string> outgoing;
    asio::steady_timer wake;      // writer waits here for outgoing messages
    asio::steady_timer all_done;  // reader waits here for writer and pump to end
    bool closing = false;
    int n_live = 0;               // writer + pump coroutines running
    bool busy = false;            // a response is running
    std::vector<int64_t> ids;     // its engine requests
    std::shared_ptr<request_stream> rs;
    int64_t error_seq = 0;
    void send(std::string m) {
      outgoing.push_back(std::move(m));
      wake.cancel();
    }
  };

  auto exec = co_await asio::this_coro::executor;
  websocket::stream<Stream> ws(std::move(stream));
  beast::get_lowest_layer(ws).expires_never();
  websocket::stream_base::timeout to{};
  to.handshake_timeout = std::chrono::seconds(30);
  to.idle_timeout = std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(ctx.opts.idle_timeout_s));
  to.keep_alive_pings = true;
  ws.set_option(to);
  ws.read_message_max(ctx.opts.max_ws_message_bytes);
  const std::string rid = ex.request_id;
  ws.set_option(websocket::stream_base::decorator([rid](websocket::response_type& res) {
    res.set(http::field::server, "spate");
    res.set("X-Request-Id", rid);
  }));
  boost::system::error_code ec;
  co_await ws.async_accept(ex.req, asio::redirect_error(asio::use_awaitable, ec));
  ex.status = 101;
  if (ec) {
    log_access(ctx, ex);
    co_return;
  }
  auto st = std::make_shared<conn_state>(exec);
  auto on_exit = [st](std::exception_ptr) {
    if (--st->n_live == 0) st->all_done.cancel();
  };

  // Writer.
  ++st->n_live;
  asio::co_spawn(
      exec,
      [&ws, st, &ctx]() -> asio::awaitable<void> {
        boost::system::error_code wec;
        for (;;) {
          if (st->outgoing.empty()) {
            if (st->closing) break;
            st->wake.expires_at(clock_type::time_point::max());
            co_await st->wake.async_wait(asio::redirect_error(asio::use_awaitable, wec));
            continue;
          }
          std::string m = std::move(st->outgoing.front());
          st->outgoing.pop_front();
          ws.text(true);
          co_await ws.async_write(asio::buffer(m), asio::redirect_error(asio::use_awaitable, wec));
          if (wec) {
            // Client gone: stop the response; the reader sees the close too.
            st->closing = true;
            cancel_generation(ctx, st->ids);
            if (st->rs) st->rs->interrupt();
            break;
          }
        }
      },
      on_exit);

  // t_arrival: when the response.create message was read (e2e latency starts there).
  auto start_response = [&](ws_create&& c, clock_type::time_point t_arrival) {
    auto rs = request_stream::create(exec);
    std::vector<int64_t> ids;
    if (auto err = submit_generation(ctx, c.gen, rs, ids)) {
      ctx.metrics.count_rejected(rejection_reason(*err));
      st->send(ws_error_event(*err, st->error_seq++));
      return;
    }
    st->busy = true;
    st->ids = ids;
    st->rs = rs;
    ++st->n_live;
    asio::co_spawn(
        exec,
        [st, rs, ids, &ctx, c = std::move(c), t_arrival, rid]() -> asio::awaitable<void> {
          auto f = make_formatter(ctx.model, c.req, c.gen, [&ctx](const char* prefix) { return ctx.make_id(prefix); },
                                  static_cast<int64_t>(std::time(nullptr)));
          ws_message_sink sink([st](std::string m) { st->send(std::move(m)); });
          generation_record rec;
          rec.t_arrival = t_arrival;
          if (co_await pump_generation(ctx, *rs, ids, *f, sink, rec)) {
            spdlog::info("{} WS response.create prompt_tokens={} completion_tokens={} ttft={:.3f}s finish_reason={}", rid,
                         c.gen.prompt.size(), rec.completion_tokens, rec.ttft_s, rec.finish_reason);
          }
          st->busy = false;
          st->ids.clear();
          st->rs.reset();
        },
        on_exit);
  };

  // Reader.
  beast::flat_buffer buf;
  for (;;) {
    buf.clear();
    co_await ws.async_read(buf, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;  // closed, reset, idle timeout, or a message over the limit (Beast closes with 1009)
    const auto t_read = clock_type::now();
    if (!ws.got_text()) {
      st->send(ws_error_event({400, "binary messages are not supported; send JSON text", "invalid_request_error", "", "invalid_message"},
                              st->error_seq++));
      continue;
    }
    const std::string msg = beast::buffers_to_string(buf.data());
    ws_create c;
    if (auto err = ws_parse_message(ctx.model, msg, c)) {
      ctx.metrics.count_rejected(rejection_reason(*err));
      st->send(ws_error_event(*err, st->error_seq++));
      continue;
    }
    if (st->busy) {
      st->send(ws_error_event({400, "a response is already in progress on this connection; wait for it to complete",
                               "invalid_request_error", "", "response_in_progress"},
                              st->error_seq++));
      continue;
    }
    if (ctx.draining.load()) {
      st->send(ws_error_event({503, "the server is shutting down", "server_error", "", "shutting_down"}, st->error_seq++));
      continue;
    }
    start_response(std::move(c), t_read);
  }
  // Closed: cancel the running response, stop the writer, wait for both.
  st->closing = true;
  cancel_generation(ctx, st->ids);
  if (st->rs) st->rs->interrupt();
  st->wake.cancel();
  while (st->n_live > 0) {
    st->all_done.expires_at(clock_type::time_point::max());
    boost::system::error_code wec;
    co_await st->all_done.async_wait(asio::redirect_error(asio::use_awaitable, wec));
  }
  log_access(ctx, ex);
  if (ws.is_open()) {
    beast::get_lowest_layer(ws).expires_after(std::chrono::seconds(2));
    co_await ws.async_close(websocket::close_code::normal, asio::redirect_error(asio::use_awaitable, ec));
  }
}

}  // namespace spate
