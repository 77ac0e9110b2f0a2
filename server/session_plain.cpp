#include "server/http_session.h"
#include "server/session_entry.h"

namespace spate {

boost::asio::awaitable<void> serve_plain_connection(server_context& ctx, boost::asio::ip::tcp::socket sock) {
  connection_slot slot(ctx);
  co_await run_http_session(ctx, beast::tcp_stream(std::move(sock)));
}

}  // namespace spate
