#include "server/model_wait.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>
#include <optional>

namespace spate {

namespace asio = boost::asio;

namespace {

// Shared by the waiting coroutine and the registry's callback.
struct wait_state {
  explicit wait_state(asio::any_io_executor ex) : ex(ex), wake(ex) {}
  asio::any_io_executor ex;
  asio::steady_timer wake;
  std::optional<model_acquired> result;
};

}  // namespace

asio::awaitable<model_acquired> acquire_model(server_context& ctx, std::string_view id, const keep_alive_fn* keep_alive,
                                              std::chrono::steady_clock::duration interval, bool explicit_load) {
  auto st = std::make_shared<wait_state>(co_await asio::this_coro::executor);
  auto on_ready = [st](model_acquired got) {
    asio::post(st->ex, [st, got = std::move(got)]() mutable {
      st->result = std::move(got);
      st->wake.cancel();
    });
  };
  auto now = explicit_load ? ctx.models->load(id, std::move(on_ready)) : ctx.models->acquire(id, std::move(on_ready));
  if (now) co_return std::move(*now);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(ctx.opts.model_load_timeout_s));
  while (!st->result) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) {
      co_return model_acquired{nullptr, api::api_error{503, "The model '" + std::string(id.empty() ? ctx.models->default_id() : id) +
                                                               "' did not load within --model-load-timeout (" +
                                                               std::to_string(static_cast<int64_t>(ctx.opts.model_load_timeout_s)) + " s)",
                                                           "server_error", "model", "model_load_timeout"}};
    }
    st->wake.expires_after(keep_alive ? std::min(left, interval) : left);
    co_await st->wake.async_wait(asio::as_tuple(asio::use_awaitable));
    if (!st->result && keep_alive && std::chrono::steady_clock::now() < deadline) co_await (*keep_alive)();
  }
  co_return std::move(*st->result);
}

}  // namespace spate
