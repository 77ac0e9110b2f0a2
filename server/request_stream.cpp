#include "server/request_stream.h"

#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace spate {

namespace asio = boost::asio;

std::shared_ptr<request_stream> request_stream::create(asio::any_io_executor ex) {
  return std::make_shared<request_stream>(std::move(ex));
}

request_stream::request_stream(asio::any_io_executor ex) : ex_(ex), wake_(ex) {}

event_callback request_stream::make_callback(int32_t choice) {
  std::weak_ptr<request_stream> weak = weak_from_this();
  asio::any_io_executor ex = ex_;
  return [weak, ex, choice](const engine_event& ev) {
    // Engine thread: copy the event and hand it to the strand.
    if (weak.expired()) return;
    asio::post(ex, [weak, t = tagged_event{choice, ev}]() mutable {
      auto self = weak.lock();
      if (!self) return;
      self->queue_.push_back(std::move(t));
      self->wake_.cancel();
    });
  };
}

asio::awaitable<std::vector<tagged_event>> request_stream::next(std::chrono::steady_clock::duration timeout) {
  if (queue_.empty() && !interrupted_) {
    wake_.expires_after(timeout);
    boost::system::error_code ec;
    co_await wake_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  std::vector<tagged_event> out(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
  queue_.clear();
  co_return out;
}

void request_stream::interrupt() {
  interrupted_ = true;
  wake_.cancel();
}

}  // namespace spate
