#include "server/generation_pump.h"

#include "protocol/anthropic_request.h"
#include "server/api_router.h"
#include "server/generation_submit.h"
#include "server/metrics.h"

namespace spate {

namespace asio = boost::asio;

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

// In-flight count for the pump's lifetime; cancels and counts the request as
// cancelled unless it completed.
class generation_run {
 public:
  generation_run(server_context& ctx, const model_lease& m, const std::vector<int64_t>& ids) : ctx_(ctx), m_(m), ids_(ids) {
    ctx_.n_inflight.fetch_add(1);
  }
  ~generation_run() {
    if (!completed_) {
      // Client gone (disconnect or failed write): the engine frees the blocks next step.
      cancel_generation(m_, ids_);
      m_.metrics().count_cancelled();
    }
    ctx_.n_inflight.fetch_sub(1);
  }
  generation_run(const generation_run&) = delete;
  generation_run& operator=(const generation_run&) = delete;
  void mark_completed() { completed_ = true; }

 private:
  server_context& ctx_;
  const model_lease& m_;
  const std::vector<int64_t>& ids_;
  bool completed_ = false;
};

// Metrics and TTFT of one engine event.
void observe(const model_lease& m, const engine_event& e, generation_record& rec) {
  switch (e.type) {
    case engine_event::kind::tokens:
      if (rec.ttft_s < 0) rec.ttft_s = seconds_since(rec.t_arrival);
      break;
    case engine_event::kind::finished:
      m.metrics().observe_finished(e, seconds_since(rec.t_arrival));
      break;
    case engine_event::kind::error:
      m.metrics().count_error();
      break;
  }
}

}  // namespace

sse_sink::sse_sink(http_exchange& ex, http_io& io, double keepalive_s, api::endpoint api)
    : ex_(ex), io_(io), keepalive_(std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(keepalive_s))),
      api_(api) {}

asio::awaitable<void> sse_sink::open() {
  if (opened_) co_return;
  opened_ = true;
  http::response<http::empty_body> res{http::status::ok, ex_.req.version()};
  res.set(http::field::content_type, "text/event-stream; charset=utf-8");
  res.set(http::field::cache_control, "no-cache");
  res.set("X-Accel-Buffering", "no");
  co_await io_.write_stream_header(ex_, std::move(res));
}

asio::awaitable<void> sse_sink::send(stream_events events) {
  std::string out;
  for (const auto& e : events) out += sse_frame(e);
  co_await io_.write_chunk(out);  // one chunk per batch; empty is not written
}

asio::awaitable<void> sse_sink::fail(const api::api_error& e) {
  if (api_ == api::endpoint::messages) {
    co_await io_.write_chunk("event: error\ndata: " + api::anthropic_error_body(e.status, e.message) + "\n\n");
  } else {
    co_await io_.write_chunk("data: " + api::error_body(e) + "\n\ndata: [DONE]\n\n");
  }
  co_await io_.write_stream_end();
}

asio::awaitable<void> sse_sink::keep_alive() {
  co_await io_.write_chunk(api_ == api::endpoint::messages ? "event: ping\ndata: {\"type\": \"ping\"}\n\n" : ": keep-alive\n\n");
}

asio::awaitable<void> sse_sink::close(const generation_formatter&) { co_await io_.write_stream_end(); }

asio::awaitable<void> ndjson_sink::open() {
  http::response<http::empty_body> res{http::status::ok, ex_.req.version()};
  res.set(http::field::content_type, "application/x-ndjson");
  co_await io_.write_stream_header(ex_, std::move(res));
}

asio::awaitable<void> ndjson_sink::send(stream_events events) {
  std::string out;
  for (const auto& e : events) {
    out += e.data;
    out += '\n';
  }
  co_await io_.write_chunk(out);
}

asio::awaitable<void> ndjson_sink::close(const generation_formatter&) { co_await io_.write_stream_end(); }

asio::awaitable<void> json_body_sink::close(const generation_formatter& f) {
  const final_body b = f.result();
  const unsigned v = ex_.req.version();
  if (!b.ok) {
    const api::api_error err{500, b.error, "server_error", "", ""};
    auto res = make_api_error_response(api_, err, v);
    co_await io_.write_response(ex_, std::move(res));
  } else {
    co_await io_.write_response(ex_, make_json_response(http::status::ok, b.body, v));
  }
}

asio::awaitable<void> ws_message_sink::send(stream_events events) {
  for (auto& e : events) post_(std::move(e.data));
  co_return;
}

asio::awaitable<bool> pump_generation(server_context& ctx, const model_lease& m, request_stream& rs, const std::vector<int64_t>& ids,
                                      generation_formatter& f, generation_sink& sink, generation_record& rec) {
  generation_run run(ctx, m, ids);
  co_await sink.open();
  co_await sink.send(f.begin());
  while (!f.done()) {
    std::vector<tagged_event> evs = co_await rs.next(sink.keepalive_interval());
    if (rs.interrupted()) {
      rec.finish_reason = "cancelled";
      co_return false;
    }
    if (evs.empty()) {
      co_await sink.keep_alive();
      continue;
    }
    stream_events out;
    for (const tagged_event& te : evs) {
      observe(m, te.ev, rec);
      for (auto& e : f.on_event(te.choice, te.ev)) out.push_back(std::move(e));
    }
    rec.completion_tokens = f.completion_tokens();
    if (f.done()) rec.finish_reason = f.finish_reason_text();
    co_await sink.send(std::move(out));
  }
  run.mark_completed();
  if (rec.gen) m.metrics().observe_request_params(rec.gen->n_prompts(), rec.gen->n, rec.gen->params.max_tokens.value_or(0));
  co_await sink.send(f.end());
  co_await sink.close(f);
  co_return true;
}

}  // namespace spate
