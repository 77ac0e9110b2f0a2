#include <boost/beast/ssl.hpp>
#include <spdlog/spdlog.h>

#include "server/http_session.h"
#include "server/session_entry.h"

namespace spate {

namespace asio = boost::asio;

asio::awaitable<void> serve_tls_connection(server_context& ctx, std::shared_ptr<asio::ssl::context> tls, asio::ip::tcp::socket sock) {
  connection_slot slot(ctx);
  beast::ssl_stream<beast::tcp_stream> s(std::move(sock), *tls);
  beast::get_lowest_layer(s).expires_after(seconds_to_duration(ctx.opts.header_timeout_s));
  boost::system::error_code ec;
  co_await s.async_handshake(asio::ssl::stream_base::server, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    spdlog::debug("TLS handshake failed: {}", ec.message());
    beast::get_lowest_layer(s).close();
    co_return;
  }
  co_await run_http_session(ctx, std::move(s));
}

}  // namespace spate
