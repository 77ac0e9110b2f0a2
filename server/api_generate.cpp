#include "server/api_generate.h"

#include <boost/asio/this_coro.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <ctime>
#include <spdlog/spdlog.h>

#include "engine/engine_api.h"
#include "tokenizer/tokenizer.h"
#include "server/api_router.h"
#include "server/generation_submit.h"
#include "protocol/logprobs_format.h"
#include "server/metrics.h"
#include "server/request_stream.h"
#include "protocol/responses_format.h"

namespace spate {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

http::response<http::string_body> error_response(const api::api_error& e, unsigned version) {
  return make_error_response(static_cast<http::status>(e.status), e.message, e.code, version, e.param);
}

http::response<http::empty_body> sse_header(unsigned version) {
  http::response<http::empty_body> res{http::status::ok, version};
  res.set(http::field::content_type, "text/event-stream; charset=utf-8");
  res.set(http::field::cache_control, "no-cache");
  res.set("X-Accel-Buffering", "no");
  return res;
}

std::string sse_data(const json::object& o) { return "data: " + json::serialize(o) + "\n\n"; }
std::string sse_event(const api_event& e) { return "event: " + e.first + "\ndata: " + e.second + "\n\n"; }

struct choice_state {
  std::string text;
  std::vector<token_logprob> logprobs;  // non-streaming: all of them
  int64_t text_offset = 0;              // completions logprobs
  bool done = false;
  std::string finish;        // OpenAI finish_reason
  std::string error;
  int32_t completion_tokens = 0;
};

// Shared per-request bookkeeping: inflight count, disconnect watch, metrics.
class generation_scope {
 public:
  generation_scope(server_context& ctx, http_io& io, std::shared_ptr<request_stream> stream, std::vector<int64_t> ids)
      : ctx_(ctx), io_(io), stream_(std::move(stream)), ids_(std::move(ids)) {
    ctx_.n_inflight.fetch_add(1);
    io_.watch_disconnect([&ctx = ctx_, stream = stream_, ids = ids_] {
      cancel_generation(ctx, ids);
      stream->interrupt();
    });
  }
  ~generation_scope() {
    io_.unwatch();
    if (!finished_) {
      // Client gone (disconnect or failed write): the engine frees the blocks next step.
      cancel_generation(ctx_, ids_);
      ctx_.metrics.count_cancelled();
    }
    ctx_.n_inflight.fetch_sub(1);
  }
  void mark_finished() { finished_ = true; }
  request_stream& stream() { return *stream_; }

 private:
  server_context& ctx_;
  http_io& io_;
  std::shared_ptr<request_stream> stream_;
  std::vector<int64_t> ids_;
  bool finished_ = false;
};

json::object usage_json(int32_t prompt, int32_t completion, int32_t cached) {
  json::object u;
  u["prompt_tokens"] = prompt;
  u["completion_tokens"] = completion;
  u["total_tokens"] = prompt + completion;
  if (cached > 0) {
    json::object d;
    d["cached_tokens"] = cached;
    u["prompt_tokens_details"] = std::move(d);
  }
  return u;
}

// Completions and chat completions.
asio::awaitable<void> run_completions(server_context& ctx, http_exchange& ex, http_io& io, const api::parsed_request& r,
                                      const prepared_generation& g, generation_scope& scope) {
  const bool chat = r.kind == api::endpoint::chat_completions;
  const std::string id = ctx.make_id(chat ? "chatcmpl" : "cmpl");
  const int64_t created = unix_now();
  const unsigned v = ex.req.version();
  const auto keepalive = std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(ctx.opts.sse_keepalive_s));
  std::vector<choice_state> choices(static_cast<size_t>(g.n));
  int32_t n_done = 0, cached = 0;

  const bool want_lp = r.logprobs.has_value() || r.chat_logprobs;
  auto lp_json = [&](choice_state& c, const std::vector<token_logprob>& lps) -> json::value {
    if (!want_lp) return nullptr;
    if (chat) return chat_logprobs(*ctx.model.tok, lps);
    return completion_logprobs(*ctx.model.tok, lps, c.text_offset);
  };
  auto chunk = [&](int32_t index, std::string_view text, const std::string& finish, bool role, json::value lp = nullptr) {
    json::object c;
    c["index"] = index;
    if (chat) {
      json::object delta;
      if (role) delta["role"] = "assistant";
      if (role || !text.empty()) delta["content"] = text;
      c["delta"] = std::move(delta);
    } else {
      c["text"] = text;
    }
    c["logprobs"] = std::move(lp);
    c["finish_reason"] = finish.empty() ? json::value(nullptr) : json::value(finish);
    json::object o;
    o["id"] = id;
    o["object"] = chat ? "chat.completion.chunk" : "text_completion";
    o["created"] = created;
    o["model"] = ctx.model.name;
    o["choices"] = json::array{c};
    if (r.include_usage) o["usage"] = nullptr;
    return sse_data(o);
  };

  if (r.stream) {
    co_await io.write_stream_header(ex, sse_header(v));
    std::string first;
    for (int32_t i = 0; i < g.n; ++i) {
      if (chat) first += chunk(i, "", "", true);
      else if (r.echo) first += chunk(i, g.prompt_text, "", false);
    }
    co_await io.write_chunk(first);
  }
  while (n_done < g.n) {
    auto evs = co_await scope.stream().next(keepalive);
    if (scope.stream().interrupted()) {
      ex.finish_reason = "cancelled";
      co_return;  // client gone; the scope cancels
    }
    if (evs.empty()) {
      if (r.stream) co_await io.write_chunk(": keep-alive\n\n");
      continue;
    }
    std::string out;
    for (auto& te : evs) {
      auto& c = choices[static_cast<size_t>(te.choice)];
      const engine_event& e = te.ev;
      if (e.type == engine_event::kind::tokens) {
        if (ex.ttft_s < 0) ex.ttft_s = seconds_since(ex.t_start);
        c.completion_tokens += static_cast<int32_t>(e.token_ids.size());
        if (r.stream) {
          if (!e.text.empty() || (want_lp && !e.logprobs.empty())) out += chunk(te.choice, e.text, "", false, lp_json(c, e.logprobs));
        } else {
          c.text += e.text;
          c.logprobs.insert(c.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
        }
      } else if (e.type == engine_event::kind::finished) {
        c.done = true;
        ++n_done;
        c.finish = openai_finish_reason(e.reason);
        c.completion_tokens = e.usage.completion_tokens;
        cached = std::max(cached, e.usage.cached_prompt_tokens);
        ctx.metrics.observe_finished(e, seconds_since(ex.t_start));
        if (r.stream) out += chunk(te.choice, "", c.finish, false);
      } else {
        c.done = true;
        ++n_done;
        c.error = e.error.empty() ? "internal error" : e.error;
        ctx.metrics.count_error();
        if (r.stream) {
          json::object err;
          err["message"] = c.error;
          err["type"] = "server_error";
          err["param"] = nullptr;
          err["code"] = nullptr;
          json::object o;
          o["error"] = std::move(err);
          out += sse_data(o);
        }
      }
    }
    if (r.stream) co_await io.write_chunk(out);
  }
  scope.mark_finished();
  int32_t completion = 0;
  std::string first_error;
  for (const auto& c : choices) {
    completion += c.completion_tokens;
    if (!c.error.empty() && first_error.empty()) first_error = c.error;
  }
  const auto n_prompt = static_cast<int32_t>(g.prompt.size());
  ex.completion_tokens = completion;
  ex.finish_reason = first_error.empty() ? choices.front().finish : "error";
  if (r.stream) {
    std::string tail;
    if (r.include_usage) {
      json::object o;
      o["id"] = id;
      o["object"] = chat ? "chat.completion.chunk" : "text_completion";
      o["created"] = created;
      o["model"] = ctx.model.name;
      o["choices"] = json::array();
      o["usage"] = usage_json(n_prompt, completion, cached);
      tail += sse_data(o);
    }
    tail += "data: [DONE]\n\n";
    co_await io.write_chunk(tail);
    co_await io.write_stream_end();
    co_return;
  }
  if (!first_error.empty()) {
    co_await io.write_response(ex, make_error_response(http::status::internal_server_error, first_error, "", v));
    co_return;
  }
  json::array arr;
  for (size_t i = 0; i < choices.size(); ++i) {
    json::object c;
    c["index"] = static_cast<int64_t>(i);
    if (chat) {
      json::object m;
      m["role"] = "assistant";
      m["content"] = choices[i].text;
      c["message"] = std::move(m);
    } else {
      c["text"] = r.echo ? g.prompt_text + choices[i].text : choices[i].text;
    }
    c["logprobs"] = lp_json(choices[i], choices[i].logprobs);
    c["finish_reason"] = choices[i].finish;
    arr.push_back(std::move(c));
  }
  json::object o;
  o["id"] = id;
  o["object"] = chat ? "chat.completion" : "text_completion";
  o["created"] = created;
  o["model"] = ctx.model.name;
  o["choices"] = std::move(arr);
  o["usage"] = usage_json(n_prompt, completion, cached);
  co_await io.write_response(ex, make_json_response(http::status::ok, json::serialize(o), v));
}

asio::awaitable<void> run_responses(server_context& ctx, http_exchange& ex, http_io& io, const api::parsed_request& r,
                                    const prepared_generation& g, generation_scope& scope) {
  const unsigned v = ex.req.version();
  const auto keepalive = std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(ctx.opts.sse_keepalive_s));
  response_builder rb(ctx.make_id("resp"), ctx.make_id("msg"), ctx.model.name, unix_now(), r);
  if (r.stream) {
    co_await io.write_stream_header(ex, sse_header(v));
    std::string first;
    for (const auto& e : rb.begin()) first += sse_event(e);
    co_await io.write_chunk(first);
  }
  bool done = false;
  std::string error;
  while (!done) {
    auto evs = co_await scope.stream().next(keepalive);
    if (scope.stream().interrupted()) {
      ex.finish_reason = "cancelled";
      co_return;
    }
    if (evs.empty()) {
      if (r.stream) co_await io.write_chunk(": keep-alive\n\n");
      continue;
    }
    std::string out;
    for (auto& te : evs) {
      const engine_event& e = te.ev;
      if (e.type == engine_event::kind::tokens) {
        if (ex.ttft_s < 0) ex.ttft_s = seconds_since(ex.t_start);
        if (!e.text.empty()) {
          auto d = rb.delta(e.text);
          if (r.stream) out += sse_event(d);
        }
      } else if (e.type == engine_event::kind::finished) {
        done = true;
        ex.completion_tokens = e.usage.completion_tokens;
        ex.finish_reason = openai_finish_reason(e.reason);
        ctx.metrics.observe_finished(e, seconds_since(ex.t_start));
        for (const auto& f : rb.finish(e.reason, e.usage)) if (r.stream) out += sse_event(f);
      } else {
        done = true;
        error = e.error.empty() ? "internal error" : e.error;
        ex.finish_reason = "error";
        ctx.metrics.count_error();
        for (const auto& f : rb.fail(error)) if (r.stream) out += sse_event(f);
      }
    }
    if (r.stream) co_await io.write_chunk(out);
  }
  scope.mark_finished();
  if (r.stream) {
    co_await io.write_stream_end();
    co_return;
  }
  if (!error.empty()) {
    co_await io.write_response(ex, make_error_response(http::status::internal_server_error, error, "", v));
    co_return;
  }
  co_await io.write_response(ex, make_json_response(http::status::ok, json::serialize(rb.response_object()), v));
}

}  // namespace

asio::awaitable<void> handle_generate(server_context& ctx, http_exchange& ex, http_io& io, api::endpoint kind) {
  const unsigned v = ex.req.version();
  api::parsed_request r;
  std::optional<api::api_error> err = api::parse_request(kind, ex.req.body(), r);
  if (!err && !r.unknown_fields.empty()) {
    std::string names;
    for (const auto& f : r.unknown_fields) names += (names.empty() ? "" : ", ") + f;
    spdlog::debug("{}: ignoring unknown fields: {}", ex.request_id, names);
  }
  if (!err && !r.model.empty() && r.model != ctx.model.name) {
    err = api::api_error{404, "The model '" + r.model + "' does not exist", "not_found_error", "model", "model_not_found"};
  }
  if (!err) err = api::validate_for_model(r, ctx.model.n_vocab);
  prepared_generation g;
  if (!err) err = prepare_generation(ctx.model, r, g);
  auto stream = request_stream::create(co_await asio::this_coro::executor);
  std::vector<int64_t> ids;
  if (!err) err = submit_generation(ctx, g, stream, ids);
  if (err) {
    ctx.metrics.count_rejected(err->code == "context_length_exceeded" ? "context_length"
                               : err->status == 429               ? "queue_full"
                                                                  : "invalid");
    ex.finish_reason = "rejected";
    co_await io.write_response(ex, error_response(*err, v));
    co_return;
  }
  ex.prompt_tokens = static_cast<int32_t>(g.prompt.size());
  generation_scope scope(ctx, io, stream, ids);
  if (kind == api::endpoint::responses) {
    co_await run_responses(ctx, ex, io, r, g, scope);
  } else {
    co_await run_completions(ctx, ex, io, r, g, scope);
  }
}

}  // namespace spate
