// The HTTP session (server/http_session.h) behind the real listener on
// loopback, driven by a raw client: request framing (Content-Length, chunked),
// limits (413, 431), keep-alive and Connection: close, pipelining, malformed
// heads (400), slow and vanished clients (408, silent close), the disconnect
// watch (a close reported, pipelined bytes kept), 100-continue,
// the API key on the head, the drain. No model and no engine: the requests go
// to the server's own probes and to an echo route the test adds to the table.
// The session proper runs on a TCP socket (deadlines cancel it, the disconnect
// watch reads it), so it is tested on loopback; the head reader, which only
// reads, is also run on Beast's test stream, with reads cut to any size.
#include "server/http_session.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "server/api_router.h"
#include "server/http_listener.h"
#include "server_test_util.h"

namespace spate {
namespace {

using test_server::error_of;
using test_server::raw_client;
using test_server::test_context;

// POST /echo answers 200 with the request body, and its size in X-Body-Bytes.
route echo_route() {
  return {{http::verb::post}, "/echo", route_auth::api_key,
          [](server_context&, http_exchange& ex, http_io& io, const route_params&) -> boost::asio::awaitable<void> {
            http::response<http::string_body> res{http::status::ok, ex.req.version()};
            res.set("X-Body-Bytes", std::to_string(ex.req.body().size()));
            res.body() = ex.req.body();
            co_await io.write_response(ex, std::move(res));
          }};
}

// What POST /watch saw: whether the client's going away was reported.
struct watch_log {
  std::atomic<int> n_closed{0};
  std::atomic<int> n_answered{0};
};

// POST /watch stands for a handler waiting on the engine: it watches the
// connection (http_io::watch_disconnect) for X-Wait-Ms milliseconds (5000
// when absent), then answers "waited"; a reported close ends the wait without
// an answer.
route watch_route(std::shared_ptr<watch_log> log) {
  return {{http::verb::post}, "/watch", route_auth::api_key,
          [log](server_context&, http_exchange& ex, http_io& io, const route_params&) -> boost::asio::awaitable<void> {
            boost::asio::steady_timer t(co_await boost::asio::this_coro::executor);
            const auto it = ex.req.find("X-Wait-Ms");
            t.expires_after(std::chrono::milliseconds(it == ex.req.end() ? 5000 : std::stoi(std::string(it->value()))));
            bool closed = false;
            io.watch_disconnect([&] {
              closed = true;
              t.cancel();
            });
            boost::system::error_code ec;
            co_await t.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
            io.unwatch();
            if (closed) {
              log->n_closed.fetch_add(1);
              co_return;
            }
            log->n_answered.fetch_add(1);
            http::response<http::string_body> res{http::status::ok, ex.req.version()};
            res.body() = "waited";
            co_await io.write_response(ex, std::move(res));
          }};
}

// Small limits and short timeouts, so that the tests reach them quickly.
cli::serve_options test_options() {
  cli::serve_options o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.n_io_threads = 1;
  o.max_body_bytes = 1024;
  o.max_header_bytes = 1024;
  o.header_timeout_s = 1.0;  // short, yet long enough for a loaded machine
  o.body_timeout_s = 1.0;
  o.idle_timeout_s = 1.0;
  return o;
}

// A listener on a free loopback port over a test_context with the echo route.
struct served {
  explicit served(cli::serve_options o = test_options()) : t(std::move(o)), listener(t.ctx) {
    t.ctx.ready = true;
    t.ctx.routes.add(echo_route());
    t.ctx.routes.add(watch_route(watch));
    listener.listen();
    listener.start();
  }
  ~served() { listener.stop(); }
  raw_client connect() { return raw_client(listener.port()); }
  // Waits (bounded) until every connection's session has ended.
  bool sessions_ended() {
    for (int i = 0; i < 200 && t.ctx.n_connections.load() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    return t.ctx.n_connections.load() == 0;
  }
  std::shared_ptr<watch_log> watch = std::make_shared<watch_log>();
  test_context t;
  http_listener listener;
};

std::string post_echo(std::string_view body, std::string_view extra = "") {
  return "POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + std::string(extra) + "\r\n" +
         std::string(body);
}

// Runs read_request_head over a Beast test stream that delivers `in` read_size
// bytes per read, then reports EOF.
struct head_result {
  head_read r;
  bool header_done = false;
  std::string target;
  std::string left;  // bytes after the head, still in the buffer
};
head_result read_head_from(std::string_view in, size_t read_size, size_t limit = 1024) {
  boost::asio::io_context io;
  beast::test::stream client(io), server(io);
  server.connect(client);
  server.read_size(read_size);
  client.write_some(boost::asio::buffer(in.data(), in.size()));
  client.close();
  head_result out;
  beast::flat_buffer buf;
  http::request_parser<http::string_body> parser;
  parser.header_limit(static_cast<uint32_t>(limit));
  test_server::run_sync(io, [&]() -> boost::asio::awaitable<void> { out.r = co_await read_request_head(server, buf, parser, limit); }());
  out.header_done = parser.is_header_done();
  if (out.header_done) out.target = std::string(parser.get().target());
  out.left = beast::buffers_to_string(buf.cdata());
  return out;
}

TEST(ReadRequestHead, WhateverTheReadSizes) {
  const std::string req = "POST /echo?a=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nbody";
  for (size_t read_size : {1, 2, 7, 4096}) {
    const head_result h = read_head_from(req, read_size);
    EXPECT_FALSE(h.r.ec) << read_size << ": " << h.r.ec.message();
    EXPECT_TRUE(h.header_done) << read_size;
    EXPECT_EQ(h.target, "/echo?a=1") << read_size;
    // The head only: what follows stays for the body reader (or the next request).
    EXPECT_TRUE(std::string_view("body").starts_with(h.left)) << read_size << ": " << h.left;
  }
}

TEST(ReadRequestHead, RefusalsAndEndOfStream) {
  head_result h = read_head_from("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n\tb\r\n\r\n", 5);
  EXPECT_TRUE(h.r.obs_fold);
  EXPECT_FALSE(h.header_done) << "refused before the parser saw it";
  h = read_head_from("GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(200, 'a') + "\r\n\r\n", 16, 100);
  EXPECT_EQ(h.r.ec, http::error::header_limit);
  h = read_head_from("GET / HTTP/1.1\r\nHost: h\r\n", 3);  // the client stops mid-head
  EXPECT_EQ(h.r.ec, boost::asio::error::eof) << "the raw read reports the end of the stream";
  auto answer = head_error_answer(h.r, false, cli::serve_options{});
  EXPECT_FALSE(answer) << "a vanished client gets no answer";
  h = read_head_from("GET / HTTP/1.1\nHost: h\n\n", 4);  // bare LF ends lines: found, then refused by the parser
  EXPECT_TRUE(h.r.ec);
  answer = head_error_answer(h.r, false, cli::serve_options{});
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, http::status::bad_request);
}

TEST(HttpSession, ContentLengthAndChunkedBodies) {
  served s;
  raw_client c = s.connect();
  c.send(post_echo("hello"));
  auto res = c.read();
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res.body(), "hello");
  EXPECT_EQ(res["X-Body-Bytes"], "5");
  EXPECT_EQ(res[http::field::server], "spate");
  EXPECT_FALSE(res["X-Request-Id"].empty());
  c.send("POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n");
  res = c.read();
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res.body(), "hello world");
  // A body that comes in pieces.
  c.send("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\n\r\nabc");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  c.send("def");
  EXPECT_EQ(c.read().body(), "abcdef");
}

TEST(HttpSession, KeepAliveConnectionCloseAndHttp10) {
  served s;
  raw_client c = s.connect();
  c.send("GET /health HTTP/1.1\r\nHost: h\r\nX-Request-Id: mine-1\r\n\r\n");
  auto first = c.read();
  EXPECT_EQ(first.result(), http::status::ok);
  EXPECT_TRUE(first.keep_alive());
  EXPECT_EQ(first["X-Request-Id"], "mine-1") << "a sane client id is echoed";
  c.send("GET /health HTTP/1.1\r\nHost: h\r\n\r\n");
  auto second = c.read();
  EXPECT_EQ(second.result(), http::status::ok);
  EXPECT_NE(second["X-Request-Id"], "mine-1");
  c.send("GET /health HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  auto last = c.read();
  EXPECT_EQ(last.result(), http::status::ok);
  EXPECT_FALSE(last.keep_alive());
  EXPECT_EQ(last[http::field::connection], "close");
  EXPECT_TRUE(c.closed_by_server());

  raw_client old = s.connect();
  old.send("GET /health HTTP/1.0\r\n\r\n");
  auto res = old.read();
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res.version(), 10u);
  EXPECT_TRUE(old.closed_by_server()) << "HTTP/1.0 without keep-alive";
  EXPECT_TRUE(s.sessions_ended());
}

TEST(HttpSession, PipelinedRequestsAnsweredInOrder) {
  served s;
  raw_client c = s.connect();
  c.send(post_echo("one") + "GET /nope HTTP/1.1\r\nHost: h\r\n\r\n" + post_echo("three") +
         "HEAD /health HTTP/1.1\r\nHost: h\r\n\r\n" + post_echo("five", "Connection: close\r\n"));
  EXPECT_EQ(c.read().body(), "one");
  auto res = c.read();
  EXPECT_EQ(res.result(), http::status::not_found);
  EXPECT_EQ(error_of(res.body()).at("message"), "no route for GET /nope");
  EXPECT_EQ(c.read().body(), "three");
  res = c.read(/*head=*/true);
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res[http::field::content_length], "15") << "HEAD: the GET's length, no body";
  EXPECT_EQ(c.read().body(), "five");
  EXPECT_TRUE(c.closed_by_server());
}

// Waits (bounded) until pred() holds.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::milliseconds(3000)) {
  for (auto t0 = std::chrono::steady_clock::now(); std::chrono::steady_clock::now() - t0 < limit;) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

std::string post_watch(std::string_view extra = "") {
  return "POST /watch HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n" + std::string(extra) + "\r\n";
}

TEST(HttpSession, WatchedClientThatClosesIsReported) {
  served s;
  {
    raw_client c = s.connect();  // closes (FIN) while the handler waits
    c.send(post_watch());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    c.close();
    EXPECT_TRUE(eventually([&] { return s.watch->n_closed.load() == 1; })) << "a close (FIN) is reported at once";
  }
  {
    raw_client c = s.connect();  // half-closes: the request ends too, as in vLLM
    c.send(post_watch());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    c.shutdown_send();
    EXPECT_TRUE(eventually([&] { return s.watch->n_closed.load() == 2; })) << "a half-close is reported";
    EXPECT_TRUE(c.closed_by_server());
  }
  EXPECT_EQ(s.watch->n_answered.load(), 0);
  EXPECT_TRUE(s.sessions_ended());
}

TEST(HttpSession, WatchKeepsPipelinedBytes) {
  served s;
  raw_client c = s.connect();
  c.send(post_watch("X-Wait-Ms: 300\r\n"));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the watch is reading by now
  c.send(post_echo("two") + post_watch("X-Wait-Ms: 300\r\n") + post_echo("four", "Connection: close\r\n"));
  EXPECT_EQ(c.read().body(), "waited");
  EXPECT_EQ(c.read().body(), "two") << "the bytes the watch read are the next request";
  EXPECT_EQ(c.read().body(), "waited");
  EXPECT_EQ(c.read().body(), "four");
  EXPECT_TRUE(c.closed_by_server());
  EXPECT_EQ(s.watch->n_closed.load(), 0);
  EXPECT_EQ(s.watch->n_answered.load(), 2);
}

TEST(HttpSession, BodyLimits) {
  served s;
  {
    raw_client c = s.connect();
    c.send("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 1025\r\n\r\n");
    auto res = c.read();
    EXPECT_EQ(res.result(), http::status::payload_too_large);
    // Decided on the header (the parser knows the limit): not one body byte is read.
    EXPECT_EQ(error_of(res.body()).at("message"), "request body is larger than the limit of 1024 bytes");
    EXPECT_EQ(res[http::field::connection], "close");
    c.send(std::string(1025, 'x'));  // the rest of the upload is read and dropped (lingering close)
    c.shutdown_send();
    EXPECT_TRUE(c.closed_by_server());
  }
  {
    raw_client c = s.connect();
    c.send(post_echo(std::string(1024, 'y')));
    EXPECT_EQ(c.read().body().size(), 1024u) << "the limit itself is allowed";
  }
  {
    raw_client c = s.connect();
    c.send("POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n" + std::string(1024, 'z') + "\r\n1\r\nz\r\n0\r\n\r\n");
    auto res = c.read();
    EXPECT_EQ(res.result(), http::status::payload_too_large);
    EXPECT_EQ(error_of(res.body()).at("message"), "request body is larger than the limit of 1024 bytes");
  }
}

TEST(HttpSession, A413OnTheHeadTakesTheApisShape) {
  served s;
  const std::pair<std::string, std::string> cases[] = {
      {"/v1/messages?beta=true",
       R"({"type":"error","error":{"type":"request_too_large","message":"request body is larger than the limit of 1024 bytes"}})"},
      {"/api/chat", R"({"error":"request body is larger than the limit of 1024 bytes"})"},
      {"/v1/chat/completions",
       R"({"error":{"message":"request body is larger than the limit of 1024 bytes","type":"invalid_request_error","param":null,"code":null}})"},
  };
  for (const auto& [path, body] : cases) {
    raw_client c = s.connect();
    c.send("POST " + path + " HTTP/1.1\r\nHost: h\r\nContent-Length: 1025\r\n\r\n");
    auto res = c.read();
    EXPECT_EQ(res.result(), http::status::payload_too_large) << path;
    EXPECT_EQ(res.body(), body) << path;
    c.shutdown_send();
    EXPECT_TRUE(c.closed_by_server()) << path;
  }
}

TEST(HttpSession, HeaderLimit) {
  served s;
  raw_client c = s.connect();
  c.send("GET /health HTTP/1.1\r\nHost: h\r\nX-Big: " + std::string(1100, 'a') + "\r\n\r\n");
  auto res = c.read();
  EXPECT_EQ(res.result(), http::status::request_header_fields_too_large);
  EXPECT_EQ(error_of(res.body()).at("message"), "request header is larger than 1024 bytes");
  raw_client ok = s.connect();
  ok.send("GET /health HTTP/1.1\r\nHost: h\r\nX-Big: " + std::string(900, 'a') + "\r\n\r\n");
  EXPECT_EQ(ok.read().result(), http::status::ok);
}

TEST(HttpSession, MalformedHeadsGet400AndClose) {
  served s;
  const std::pair<const char*, const char*> cases[] = {
      {"GARBAGE\r\n\r\n", "malformed HTTP request: "},
      {"GET /health HTTP/1.1\r\n\r\n", "Host"},
      {"GET /health HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n  folded\r\n\r\n", "obsolete line folding in the request header"},
      {"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", ""},
      {"POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "malformed HTTP request body: "},
  };
  for (const auto& [raw, message] : cases) {
    raw_client c = s.connect();
    c.send(raw);
    auto res = c.read();
    EXPECT_EQ(res.result(), http::status::bad_request) << raw;
    EXPECT_NE(std::string(error_of(res.body()).at("message").as_string()).find(message), std::string::npos)
        << raw << " -> " << res.body();
    EXPECT_FALSE(res.keep_alive()) << raw;
    c.shutdown_send();
    EXPECT_TRUE(c.closed_by_server()) << raw;
  }
  EXPECT_TRUE(s.sessions_ended());
}

TEST(HttpSession, SlowAndVanishedClients) {
  served s;
  {
    raw_client silent = s.connect();  // never sends a byte: closed without an answer
    EXPECT_EQ(silent.read_to_close(), "");
  }
  {
    raw_client slow = s.connect();  // a partial head: 408
    slow.send("GET /health HTTP/1.1\r\nHost: h\r\n");
    auto res = slow.read();
    EXPECT_EQ(res.result(), http::status::request_timeout);
    EXPECT_EQ(error_of(res.body()).at("message"), "timed out reading the request header");
  }
  {
    raw_client slow_body = s.connect();
    slow_body.send(post_echo("0123456789").substr(0, 60));
    auto res = slow_body.read();
    EXPECT_EQ(res.result(), http::status::request_timeout);
    EXPECT_EQ(error_of(res.body()).at("message"), "timed out reading the request body");
  }
  {
    raw_client idle = s.connect();  // keep-alive, then silent past --idle-timeout: closed without an answer
    idle.send("GET /health HTTP/1.1\r\nHost: h\r\n\r\n");
    EXPECT_EQ(idle.read().result(), http::status::ok);
    EXPECT_EQ(idle.read_to_close(), "");
  }
  {
    raw_client gone = s.connect();  // vanishes mid-head and mid-body
    gone.send("GET /health HTTP/1.1\r\nHo");
    gone.close();
    raw_client gone_body = s.connect();
    gone_body.send(post_echo("0123456789").substr(0, 60));
    gone_body.close();
  }
  EXPECT_TRUE(s.sessions_ended()) << "every session ended: none waits on a vanished client";
}

TEST(HttpSession, ExpectContinue) {
  served s;
  raw_client c = s.connect();
  c.send("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
  auto interim = c.read();
  EXPECT_EQ(interim.result(), http::status::continue_);
  c.send("data");
  EXPECT_EQ(c.read().body(), "data");
  raw_client big = s.connect();  // refused on the head: no 100 Continue
  big.send("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(big.read().result(), http::status::payload_too_large);
}

TEST(HttpSession, ApiKeyOnTheHead) {
  served s;
  s.t.ctx.set_api_keys({"k1"});
  raw_client c = s.connect();
  c.send(post_echo("hi"));
  auto res = c.read();
  EXPECT_EQ(res.result(), http::status::unauthorized);
  EXPECT_EQ(res[http::field::www_authenticate], "Bearer");
  EXPECT_EQ(error_of(res.body()).at("code"), "invalid_api_key");
  EXPECT_FALSE(res.keep_alive());

  raw_client ok = s.connect();
  ok.send(post_echo("hi", "Authorization: Bearer k1\r\n") + "GET /health HTTP/1.1\r\nHost: h\r\n\r\n" +
          "POST /health HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(ok.read().body(), "hi");
  EXPECT_EQ(ok.read().result(), http::status::ok) << "/health is public";
  res = ok.read();
  EXPECT_EQ(res.result(), http::status::method_not_allowed);
  EXPECT_EQ(res[http::field::allow], "GET, HEAD");

  raw_client public_body = s.connect();  // a public route is never worth a keyless body
  public_body.send("POST /health HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_EQ(public_body.read().result(), http::status::payload_too_large);
}

TEST(HttpSession, DrainAnswersThenCloses) {
  served s;
  raw_client c = s.connect();
  c.send("GET /health HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_TRUE(c.read().keep_alive());
  // Once the session waits for the next request (registered idle), the drain begins.
  for (int i = 0; i < 200 && s.t.ctx.idle.size() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(s.t.ctx.idle.size(), 1u);
  s.t.ctx.draining = true;
  c.send(post_echo("x"));
  auto res = c.read();
  EXPECT_EQ(res.result(), http::status::service_unavailable);
  EXPECT_EQ(error_of(res.body()).at("message"), "the server is shutting down");
  EXPECT_FALSE(res.keep_alive());
  EXPECT_TRUE(c.closed_by_server());
}

TEST(HttpSession, WebSocketUpgradeOnAnotherPath) {
  served s;
  raw_client c = s.connect();
  c.send("GET /v1/models HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n");
  auto res = c.read();
  EXPECT_EQ(res.result(), http::status::not_found);
  EXPECT_EQ(error_of(res.body()).at("message"), "WebSocket is served on GET /v1/responses only");
  EXPECT_TRUE(c.closed_by_server());
}

}  // namespace
}  // namespace spate
