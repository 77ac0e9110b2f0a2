// GET /v1/responses upgraded to a WebSocket: the Responses API WebSocket mode.
//
// Three coroutines share the connection's strand:
//   reader  (run_ws_responses): reads client messages; starts responses; on close
//           or error cancels the running response and waits for the others;
//   writer: the only one that writes; drains the outgoing queue in order;
//   pump:   one per running response: pump_generation (generation_pump.h)
//           with a ws_message_sink that queues the events for the writer.
// One response runs at a time; response.create while one runs gets an error
// event. Limits: --max-ws-message-bytes per message (bigger: close 1009),
// --idle-timeout with keep-alive pings.
//
// Drain (SIGTERM): the connection holds a ws_registry ticket (ctx.open_ws)
// from before its upgrade until its socket is closed, so the drain waits for
// it. Once the drain begins, the writer closes the WebSocket with 1001 (going
// away) as soon as no response runs and every queued event is written: at
// once when idle, after the final event of a response in flight. A
// response.create during the drain starts nothing: an error event (code
// shutting_down) and then 1001; no response has begun, so a client may retry
// it elsewhere. An upgrade that the drain overtook after check_ws_upgrade
// gets 503, as check_ws_upgrade answers during the drain.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/openai_request.h"
#include "server/api_router.h"
#include "server/http_io.h"
#include "server/request_stream.h"
#include "server/server_context.h"
#include "server/ws_subprotocol.h"

namespace spate {

// The state one WebSocket connection's reader, writer and pump share.
// Strand only; held by shared_ptr by each of them.
struct ws_connection {
  explicit ws_connection(boost::asio::any_io_executor ex) : exec(ex), wake(ex), all_done(ex) {}
  boost::asio::any_io_executor exec;
  std::string request_id;             // of the upgrade request (logs)
  std::deque<std::string> outgoing;
  boost::asio::steady_timer wake;      // writer waits here for outgoing messages
  boost::asio::steady_timer all_done;  // reader waits here for writer and pump to end
  bool closing = false;
  int n_live = 0;                      // writer + pump coroutines running
  bool busy = false;                   // a response is running
  bool drain = false;                  // the server drains: close with 1001 once idle and flushed
  std::vector<int64_t> ids;            // its engine requests
  std::shared_ptr<request_stream> rs;
  model_handle lease;                  // the running response's model
  int64_t error_seq = 0;

  // Queues one text message for the writer. Never blocks.
  void send(std::string m) {
    outgoing.push_back(std::move(m));
    wake.cancel();
  }
  // Queues an error event (the next error sequence number).
  void send_error(const api::api_error& e);
  // A writer or pump coroutine ended (its co_spawn completion handler).
  void coroutine_ended() {
    if (--n_live == 0) all_done.cancel();
  }
  // Cancels the running response's engine requests and interrupts its pump.
  void stop_response(server_context& ctx);
  // The server drains: the writer closes with 1001 once idle and flushed.
  void begin_drain() {
    drain = true;
    wake.cancel();
  }
};

// One text message from the client, read at t_arrival: a response.create
// starts a response (its pump runs as a coroutine on st->exec) unless one is
// running or the server drains; anything else gets an error event. Refusals
// are counted in spate:request_rejected_total like HTTP's.
void ws_handle_message(server_context& ctx, const std::shared_ptr<ws_connection>& st, std::string_view msg,
                       std::chrono::steady_clock::time_point t_arrival);

// The only coroutine writing to ws: drains st->outgoing in order until
// st->closing and empty, or until st->drain with no response running, when
// it closes the WebSocket with 1001 (the reader's pending read then ends). A
// failed write stops the running response.
template <class WsStream>
boost::asio::awaitable<void> ws_write_loop(WsStream& ws, std::shared_ptr<ws_connection> st, server_context& ctx) {
  namespace asio = boost::asio;
  namespace websocket = boost::beast::websocket;
  boost::system::error_code ec;
  for (;;) {
    if (st->outgoing.empty()) {
      if (st->closing) break;
      if (st->drain && !st->busy) {
        // Bounded by the stream's handshake_timeout, which Beast applies to the closing handshake.
        if (ws.is_open()) {
          co_await ws.async_close(websocket::close_reason(websocket::close_code::going_away, "server shutting down"),
                                  asio::redirect_error(asio::use_awaitable, ec));
        }
        break;
      }
      st->wake.expires_at(std::chrono::steady_clock::time_point::max());
      co_await st->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    std::string m = std::move(st->outgoing.front());
    st->outgoing.pop_front();
    ws.text(true);
    co_await ws.async_write(asio::buffer(m), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      // Client gone: stop the response; the reader sees the close too.
      st->closing = true;
      st->stop_response(ctx);
      break;
    }
  }
}

// Answers an upgrade that the drain overtook (ws_registry::ticket::late) with
// 503 and Connection: close, as check_ws_upgrade does during the drain; no
// byte of a WebSocket was sent, so a balancer may retry it elsewhere. The
// caller then drops the stream.
template <class Stream>
boost::asio::awaitable<void> refuse_upgrade_draining(server_context& ctx, Stream& stream, http_exchange& ex) {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  auto res = make_error_response(http::status::service_unavailable, "the server is shutting down", "", ex.req.version());
  res.set(http::field::server, "spate");
  res.set("X-Request-Id", ex.request_id);
  ctx.cors.decorate(ex.req.base(), res);
  res.keep_alive(false);
  res.prepare_payload();
  ex.status = res.result_int();
  auto& lowest = beast::get_lowest_layer(stream);
  lowest.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(ctx.opts.write_timeout_s)));
  boost::system::error_code ec;
  co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
  log_access(ctx, ex);
  lowest.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
}

// Accepts the upgrade of ex.req on stream and runs the connection (the
// reader) until it closes; then stops the response, waits for the writer and
// pump, logs the exchange and closes. Holds a ctx.open_ws ticket throughout
// (see the drain above). Never throws.
template <class Stream>
boost::asio::awaitable<void> run_ws_responses(server_context& ctx, Stream stream, http_exchange ex) {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  namespace websocket = beast::websocket;
  using clock_type = std::chrono::steady_clock;

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
  std::string subprotocol;  // echoed to browsers that offered one (ws_subprotocol.h)
  if (auto it = ex.req.find(http::field::sec_websocket_protocol); it != ex.req.end())
    subprotocol = std::string(selected_subprotocol(it->value()));
  ws.set_option(websocket::stream_base::decorator([rid, subprotocol](websocket::response_type& res) {
    res.set(http::field::server, "spate");
    res.set("X-Request-Id", rid);
    if (!subprotocol.empty()) res.set(http::field::sec_websocket_protocol, subprotocol);
  }));
  auto st = std::make_shared<ws_connection>(exec);
  st->request_id = rid;
  // Counted by the drain from before the 101 until the socket is closed. The
  // drain's notice is posted to this strand (exec) and finds st if it lives.
  const auto ticket = ctx.open_ws.enter([exec, w = std::weak_ptr<ws_connection>(st)] {
    asio::post(exec, [w] {
      if (auto s = w.lock()) s->begin_drain();
    });
  });
  if (ticket->late()) {
    co_await refuse_upgrade_draining(ctx, ws.next_layer(), ex);
    co_return;
  }
  boost::system::error_code ec;
  co_await ws.async_accept(ex.req, asio::redirect_error(asio::use_awaitable, ec));
  ex.status = 101;
  if (ec) {
    log_access(ctx, ex);
    co_return;
  }
  ++st->n_live;
  asio::co_spawn(exec, ws_write_loop(ws, st, ctx), [st](std::exception_ptr) { st->coroutine_ended(); });

  beast::flat_buffer buf;
  for (;;) {
    buf.clear();
    co_await ws.async_read(buf, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;  // closed, reset, idle timeout, or a message over the limit (Beast closes with 1009)
    const auto t_read = clock_type::now();
    if (!ws.got_text()) {
      st->send_error({400, "binary messages are not supported; send JSON text", "invalid_request_error", "", "invalid_message"});
      continue;
    }
    ws_handle_message(ctx, st, beast::buffers_to_string(buf.data()), t_read);
  }
  // Closed: cancel the running response, stop the writer, wait for both.
  st->closing = true;
  st->stop_response(ctx);
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
