// Helpers of the router and session tests: a server_context without a model
// or an engine (routes that reach the engine are never dispatched to), an
// http_io that records what a handler writes, and a raw HTTP client on a
// blocking loopback socket with bounded waits.
//
// Thread-safety: each object is used by one test thread (the listener's I/O
// threads only touch the server_context, through its thread-safe members).
#pragma once

#include <gtest/gtest.h>
#include <poll.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "server/http_io.h"
#include "server/metrics.h"
#include "server/server_context.h"

namespace spate::test_server {

namespace asio = boost::asio;
namespace beast = boost::beast;

inline constexpr const char* k_model_name = "org/test-model";

// A server_context over a registry with one model that has no engine
// (served_model has a name only). opts as given; the routes are
// api_routes(!opts.disable_ui) until a test adds its own.
struct test_context {
  explicit test_context(cli::serve_options opts = {}) : registry(make_registry()), ctx{registry.get(), std::move(opts), 1700000000} {}
  static api::served_model model() {
    api::served_model m;
    m.max_model_len = 64;
    m.name = k_model_name;
    return m;
  }
  static std::unique_ptr<model_registry> make_registry() {
    auto r = std::make_unique<model_registry>(std::vector<model_spec>{}, nullptr, registry_options{});
    auto m = std::make_unique<serving_model>();
    m->info = model();
    model_spec spec;
    spec.id = k_model_name;
    spec.pinned = true;
    spec.max_model_len = 64;
    r->add_loaded(std::move(spec), std::move(m));
    return r;
  }
  server_metrics& metrics() { return registry->default_metrics(); }
  std::unique_ptr<model_registry> registry;
  server_context ctx;
};

// Records the responses a handler writes; keep_alive() as constructed.
class recording_io final : public http_io {
 public:
  asio::awaitable<void> write_response(http_exchange& ex, http::response<http::string_body> res) override {
    ex.status = res.result_int();
    responses.push_back(std::move(res));
    co_return;
  }
  asio::awaitable<void> write_stream_header(http_exchange& ex, http::response<http::empty_body> res) override {
    ex.status = res.result_int();
    ++n_stream_headers;
    co_return;
  }
  asio::awaitable<void> write_chunk(std::string_view data) override {
    streamed += data;
    co_return;
  }
  asio::awaitable<void> write_stream_end() override { co_return; }
  void watch_disconnect(std::function<void()>) override {}
  void unwatch() override {}
  bool keep_alive() const override { return true; }

  std::vector<http::response<http::string_body>> responses;
  int n_stream_headers = 0;
  std::string streamed;
};

// Runs an awaitable<void> to completion on io (whose objects it may use); rethrows.
inline void run_sync(asio::io_context& io, asio::awaitable<void> a) {
  auto f = asio::co_spawn(io, std::move(a), asio::use_future);
  io.restart();
  io.run();
  f.get();
}
// The same on a private io_context.
inline void run_sync(asio::awaitable<void> a) {
  asio::io_context io;
  run_sync(io, std::move(a));
}

// The "error" object of an OpenAI-shaped error body.
inline boost::json::object error_of(const std::string& body) { return boost::json::parse(body).as_object().at("error").as_object(); }

// A blocking client on one loopback connection. Every wait is bounded
// (k_wait): a server that does not answer fails the test instead of hanging it.
class raw_client {
 public:
  static constexpr std::chrono::milliseconds k_wait{5000};

  explicit raw_client(uint16_t port) : sock_(io_) { sock_.connect({asio::ip::address_v4::loopback(), port}); }

  void send(std::string_view raw) { asio::write(sock_, asio::buffer(raw.data(), raw.size())); }
  // Half-close: no more bytes from the client.
  void shutdown_send() { sock_.shutdown(asio::ip::tcp::socket::shutdown_send); }
  void close() { sock_.close(); }

  // Reads one response (an interim 1xx included); throws std::runtime_error on
  // a timeout or when the connection ends first. head: the request was HEAD.
  http::response<http::string_body> read(bool head = false) {
    http::response_parser<http::string_body> p;
    p.eager(true);
    p.body_limit(64 << 20);
    if (head) p.skip(true);
    for (;;) {
      if (buf_.size() > 0) {
        boost::system::error_code ec;
        const size_t n = p.put(buf_.data(), ec);
        buf_.consume(n);
        if (ec && ec != http::error::need_more) throw std::runtime_error("bad response: " + ec.message());
        if (p.is_done()) return p.release();
        if (!ec && n > 0) continue;
      }
      if (!fill()) {
        boost::system::error_code ec;
        if (!p.got_some()) throw std::runtime_error("the connection ended before a response");
        p.put_eof(ec);
        if (!ec && p.is_done()) return p.release();
        throw std::runtime_error("the connection ended before a complete response");
      }
    }
  }

  // True when the server closes the connection (EOF or reset) within k_wait
  // with no further bytes; false when bytes come or it stays open.
  bool closed_by_server() {
    if (buf_.size() > 0) return false;
    try {
      return !fill();
    } catch (const std::runtime_error&) {
      return false;  // still open
    }
  }
  // Everything the server sends until it closes the connection (bounded).
  std::string read_to_close() {
    while (fill()) {
    }
    const auto d = buf_.data();
    std::string s(static_cast<const char*>(d.data()), d.size());
    buf_.consume(buf_.size());
    return s;
  }

 private:
  // Reads more bytes: true when some came, false on EOF or reset. Throws on timeout.
  bool fill() {
    pollfd p{sock_.native_handle(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(k_wait.count())) != 1) throw std::runtime_error("timed out waiting for the server");
    boost::system::error_code ec;
    const size_t n = sock_.read_some(buf_.prepare(64 << 10), ec);
    if (ec) return false;
    buf_.commit(n);
    return true;
  }

  asio::io_context io_;
  asio::ip::tcp::socket sock_;
  beast::flat_buffer buf_;
};

}  // namespace spate::test_server
