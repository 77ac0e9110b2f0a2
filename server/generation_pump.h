// The one place where a running generation's engine events become output:
// pump_generation() reads a request's events from its request_stream, feeds
// them to the API's formatter (protocol/generation_format.h) and hands what
// comes out to a sink -- SSE, a single JSON body, or WebSocket messages. It
// also records the request's metrics (TTFT, e2e from the request's arrival,
// success / error / cancelled counters) and keeps the in-flight count.
//
// Thread-safety: everything runs on the session's strand; sinks are used by
// one pump at a time.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "protocol/generation_format.h"
#include "server/http_io.h"
#include "server/request_stream.h"
#include "server/server_context.h"

namespace spate {

// Where a formatter's output goes. Calls come one at a time, in this order:
// open, send*/keep_alive*, and close only when the generation completed (an
// interrupted stream just ends). HTTP sinks throw boost::system::system_error
// when the client is gone or a write times out (see http_io).
class generation_sink {
 public:
  virtual ~generation_sink() = default;
  // How long the pump waits for engine events before calling keep_alive().
  virtual std::chrono::steady_clock::duration keepalive_interval() const = 0;
  // Before the first events (SSE: the response header).
  virtual boost::asio::awaitable<void> open() = 0;
  // A batch of streaming events (may be empty).
  virtual boost::asio::awaitable<void> send(stream_events events) = 0;
  // keepalive_interval passed without an event.
  virtual boost::asio::awaitable<void> keep_alive() = 0;
  // After the formatter's end() events were sent (SSE: the last chunk; JSON: the body or the error).
  virtual boost::asio::awaitable<void> close(const generation_formatter& f) = 0;
};

// text/event-stream over a chunked HTTP response; ": keep-alive" comments every
// keepalive_s seconds (Anthropic's Messages API: `ping` events).
class sse_sink final : public generation_sink {
 public:
  sse_sink(http_exchange& ex, http_io& io, double keepalive_s, api::endpoint api = api::endpoint::chat_completions);
  std::chrono::steady_clock::duration keepalive_interval() const override { return keepalive_; }
  boost::asio::awaitable<void> open() override;
  boost::asio::awaitable<void> send(stream_events events) override;
  boost::asio::awaitable<void> keep_alive() override;
  boost::asio::awaitable<void> close(const generation_formatter& f) override;
  bool opened() const { return opened_; }
  // After open(), instead of a generation: one error event, [DONE], the end.
  boost::asio::awaitable<void> fail(const api::api_error& e);

 private:
  http_exchange& ex_;
  http_io& io_;
  std::chrono::steady_clock::duration keepalive_;
  api::endpoint api_;
  bool opened_ = false;  // open() writes the header once (a model load may have opened the stream)
};

// One JSON response (200 with the formatter's body, or 500 with the engine
// error, in the API's error shape).
class json_body_sink final : public generation_sink {
 public:
  json_body_sink(http_exchange& ex, http_io& io, api::endpoint api = api::endpoint::chat_completions) : ex_(ex), io_(io), api_(api) {}
  std::chrono::steady_clock::duration keepalive_interval() const override { return std::chrono::hours(24); }
  boost::asio::awaitable<void> open() override { co_return; }
  boost::asio::awaitable<void> send(stream_events) override { co_return; }
  boost::asio::awaitable<void> keep_alive() override { co_return; }
  boost::asio::awaitable<void> close(const generation_formatter& f) override;

 private:
  http_exchange& ex_;
  http_io& io_;
  api::endpoint api_;
};

// Ollama's streaming: application/x-ndjson over a chunked HTTP response, one
// JSON object per line; no keep-alives (NDJSON has no comments).
class ndjson_sink final : public generation_sink {
 public:
  ndjson_sink(http_exchange& ex, http_io& io) : ex_(ex), io_(io) {}
  std::chrono::steady_clock::duration keepalive_interval() const override { return std::chrono::hours(24); }
  boost::asio::awaitable<void> open() override;
  boost::asio::awaitable<void> send(stream_events events) override;
  boost::asio::awaitable<void> keep_alive() override { co_return; }
  boost::asio::awaitable<void> close(const generation_formatter&) override;

 private:
  http_exchange& ex_;
  http_io& io_;
};

// WebSocket text messages: each event's JSON is handed to post_message (which
// queues it for the connection's writer and must not block).
class ws_message_sink final : public generation_sink {
 public:
  explicit ws_message_sink(std::function<void(std::string)> post_message) : post_(std::move(post_message)) {}
  std::chrono::steady_clock::duration keepalive_interval() const override { return std::chrono::hours(24); }
  boost::asio::awaitable<void> open() override { co_return; }
  boost::asio::awaitable<void> send(stream_events events) override;
  boost::asio::awaitable<void> keep_alive() override { co_return; }
  boost::asio::awaitable<void> close(const generation_formatter&) override { co_return; }

 private:
  std::function<void(std::string)> post_;
};

// What the pump observed, for the access log; updated as it goes (so it is
// meaningful when a write throws).
struct generation_record {
  std::chrono::steady_clock::time_point t_arrival;  // in: when the request arrived (e2e latency starts here)
  const prepared_generation* gen = nullptr;          // in: its n and max_tokens go to spate:request_params_* when it completes
  double ttft_s = -1;                                // seconds from t_arrival to the first token; -1: none
  int32_t completion_tokens = 0;
  std::string finish_reason;                         // OpenAI reason, "error", or "cancelled" when interrupted
};

// Pumps until every choice has finished or failed (returns true after
// sink.close), or the stream is interrupted (returns false; the client is
// gone). ids: the engine requests feeding rs. Unless the generation
// completed -- interrupted, or a sink write threw -- the engine requests are
// cancelled and the request counted as cancelled (in m's metrics); once it completed, its
// parameters (rec.gen) are observed. Counts the request in
// ctx.n_inflight while it runs.
boost::asio::awaitable<bool> pump_generation(server_context& ctx, const model_lease& m, request_stream& rs, const std::vector<int64_t>& ids,
                                             generation_formatter& f, generation_sink& sink, generation_record& rec);

}  // namespace spate
