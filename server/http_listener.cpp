#include "server/http_listener.h"

#include <sys/socket.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include "server/session_entry.h"
#include "util/regular_file.h"

namespace spate {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;

namespace {

constexpr uint64_t k_max_pem_bytes = 1u << 20;  // a certificate chain or key file, at most

std::shared_ptr<ssl::context> make_tls_context(const cli::serve_options& o) {
  auto c = std::make_shared<ssl::context>(ssl::context::tls_server);
  c->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                 ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  // No client-initiated renegotiation (a CPU cost a client could repeat at will) and no
  // compression (CRIME).
  SSL_CTX_set_options(c->native_handle(), SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  // TLS 1.2's suites; TLS 1.3's (all AEAD with forward secrecy) stay OpenSSL's defaults.
  if (SSL_CTX_set_cipher_list(c->native_handle(), o.ssl_ciphers.c_str()) != 1) {
    throw std::runtime_error("--ssl-ciphers '" + o.ssl_ciphers + "': no cipher OpenSSL knows");
  }
  // Read here (OpenSSL's file loaders would block on a FIFO), then parsed from memory.
  std::string pem;
  boost::system::error_code ec;
  if (auto err = read_regular_file(o.ssl_certfile, pem, k_max_pem_bytes); !err.empty())
    throw std::runtime_error("--ssl-certfile " + o.ssl_certfile + ": " + err);
  c->use_certificate_chain(asio::buffer(pem), ec);
  if (ec) throw std::runtime_error("--ssl-certfile " + o.ssl_certfile + ": " + ec.message());
  if (auto err = read_regular_file(o.ssl_keyfile, pem, k_max_pem_bytes); !err.empty())
    throw std::runtime_error("--ssl-keyfile " + o.ssl_keyfile + ": " + err);
  c->use_private_key(asio::buffer(pem), ssl::context::pem, ec);
  OPENSSL_cleanse(pem.data(), pem.size());
  if (ec) throw std::runtime_error("--ssl-keyfile " + o.ssl_keyfile + ": " + ec.message());
  return c;
}

}  // namespace

http_listener::http_listener(server_context& ctx) : ctx_(ctx), acceptor_(ioc_) {
  if (!ctx.opts.ssl_certfile.empty()) ssl_ = make_tls_context(ctx.opts);
}

http_listener::~http_listener() { stop(); }

void http_listener::listen() {
  boost::system::error_code ec;
  const auto addr = asio::ip::make_address(ctx_.opts.host, ec);
  if (ec) throw std::runtime_error("--host '" + ctx_.opts.host + "' is not an IP address");
  const tcp::endpoint ep(addr, static_cast<uint16_t>(ctx_.opts.port));
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("cannot listen on " + ctx_.opts.host + ":" + std::to_string(ctx_.opts.port) + ": " + ec.message());
  port_ = acceptor_.local_endpoint().port();
}

void http_listener::adopt(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0 || (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)) {
    throw std::runtime_error("inherited socket (LISTEN_FDS) fd " + std::to_string(fd) + " is not a TCP socket");
  }
  boost::system::error_code ec;
  acceptor_.assign(ss.ss_family == AF_INET ? tcp::v4() : tcp::v6(), fd, ec);
  if (ec) throw std::runtime_error("cannot use inherited socket fd " + std::to_string(fd) + ": " + ec.message());
  port_ = acceptor_.local_endpoint().port();
}

std::string http_listener::reload_tls() {
  if (!std::atomic_load(&ssl_)) return "";
  try {
    std::atomic_store(&ssl_, make_tls_context(ctx_.opts));
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

void http_listener::start() {
  asio::co_spawn(ioc_, accept_loop(), asio::detached);
  for (int i = 0; i < ctx_.opts.n_io_threads; ++i) {
    threads_.emplace_back([this] { ioc_.run(); });
  }
}

asio::awaitable<void> http_listener::accept_loop() {
  for (;;) {
    auto strand = asio::make_strand(ioc_);
    boost::system::error_code ec;
    tcp::socket sock = co_await acceptor_.async_accept(strand, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
      spdlog::warn("accept failed: {}", ec.message());
      continue;  // e.g. EMFILE: the next accept may succeed
    }
    // At the limit, the oldest idle keep-alive connection makes room (it
    // closes on its strand right after); only when none is idle is the new
    // one refused. Momentarily the count may exceed the limit by the
    // connections being closed so, never by more than the limit again.
    if (ctx_.n_connections.load() >= ctx_.opts.max_connections && !ctx_.idle.close_oldest()) {
      spdlog::warn("refusing a connection: --max-connections {} reached and none is idle", ctx_.opts.max_connections);
      sock.close(ec);
      continue;
    }
    sock.set_option(tcp::no_delay(true), ec);
    if (auto tls = std::atomic_load(&ssl_)) {
      asio::co_spawn(strand, serve_tls_connection(ctx_, std::move(tls), std::move(sock)), asio::detached);
    } else {
      asio::co_spawn(strand, serve_plain_connection(ctx_, std::move(sock)), asio::detached);
    }
  }
}

void http_listener::stop_accepting() {
  asio::post(ioc_, [this] {
    boost::system::error_code ec;
    acceptor_.close(ec);
  });
}

void http_listener::stop() {
  ioc_.stop();
  for (auto& t : threads_) if (t.joinable()) t.join();
  threads_.clear();
}

}  // namespace spate
