#include "server/api_embeddings.h"

#include <boost/asio/this_coro.hpp>
#include <spdlog/spdlog.h>

#include "protocol/embeddings.h"
#include "server/api_ollama.h"
#include "server/api_router.h"
#include "server/generation_submit.h"
#include "server/metrics.h"
#include "protocol/ollama_request.h"
#include "server/model_wait.h"
#include "server/request_stream.h"
#include "tokenizer/tokenizer.h"

namespace spate {

namespace asio = boost::asio;

namespace {

// The token ids of every input, or the 400/404 that refuses the request.
std::optional<api::api_error> prepare_inputs(const api::served_model& m, const api::embeddings_request& r,
                                             std::vector<std::vector<int32_t>>& inputs) {
  if (m.pooling == pooling_type::none) {
    return api::api_error{400, "this server does not serve embeddings (pooling is none; start it with --pooling mean|last|cls)",
                          "invalid_request_error", "", "embeddings_unsupported"};
  }
  if (r.dimensions && *r.dimensions != m.n_embd) {
    return api::api_error{400, "'dimensions' must be the model's embedding width " + std::to_string(m.n_embd) + " (vectors are not truncated), got " +
                                   std::to_string(*r.dimensions),
                          "invalid_request_error", "dimensions", ""};
  }
  inputs = r.token_inputs;
  for (const auto& text : r.texts) inputs.push_back(m.tok->encode(text, /*add_special=*/true, /*parse_special=*/false));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string param = r.n_inputs() == 1 && !r.texts.empty() ? "input" : "input[" + std::to_string(i) + "]";
    if (inputs[i].empty()) return api::api_error{400, "'" + param + "' has no tokens", "invalid_request_error", param, ""};
    if (auto e = api::validate_token_ids(inputs[i], m.n_vocab, param)) return e;
  }
  return std::nullopt;
}

std::vector<engine_request> embedding_requests(const api::served_model& m, const std::vector<std::vector<int32_t>>& inputs) {
  std::vector<engine_request> reqs(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    reqs[i].prompt = inputs[i];
    reqs[i].params.temperature = 0.0f;
    reqs[i].embed = m.pooling;
  }
  return reqs;
}

// The body of the API's route as an embeddings request.
std::optional<api::api_error> parse_body(embed_api api, std::string_view body, api::embeddings_request& r) {
  if (api == embed_api::openai) return api::parse_embeddings(body, r);
  return api::parse_ollama_embed(body, api == embed_api::ollama_legacy, r.model, r.texts);
}

// The answer to the vectors of r's inputs.
std::string format_answer(embed_api api, const std::vector<std::vector<float>>& vectors, const api::embeddings_request& r,
                          const std::string& model, int64_t prompt_tokens, std::chrono::steady_clock::time_point t_start) {
  if (api == embed_api::openai) return api::format_embeddings(vectors, r.base64, model, prompt_tokens);
  namespace json = boost::json;
  const auto vec = [](const std::vector<float>& v) {
    json::array a;
    for (float f : v) a.push_back(f);
    return a;
  };
  if (api == embed_api::ollama_legacy) return json::serialize(json::object{{"embedding", vec(vectors.front())}});
  json::array all;
  for (const auto& v : vectors) all.push_back(vec(v));
  const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t_start).count();
  return json::serialize(json::object{{"model", model}, {"embeddings", std::move(all)}, {"total_duration", ns}, {"load_duration", 0},
                                      {"prompt_eval_count", prompt_tokens}});
}

}  // namespace

asio::awaitable<void> handle_embeddings(server_context& ctx, http_exchange& ex, http_io& io, embed_api api) {
  const unsigned v = ex.req.version();
  const api::endpoint shape = api == embed_api::openai ? api::endpoint::chat_completions : api::endpoint::ollama_chat;
  api::embeddings_request r;
  std::vector<std::vector<int32_t>> inputs;
  auto err = parse_body(api, ex.req.body(), r);
  if (!err && api != embed_api::openai) r.model = ollama_model_id(*ctx.models, r.model);  // "NAME:latest"
  model_handle lease;
  if (!err) {
    model_acquired got = co_await acquire_model(ctx, r.model, nullptr, std::chrono::seconds(1));
    lease = std::move(got.lease);
    err = std::move(got.error);
  }
  if (!err) err = prepare_inputs(lease->model(), r, inputs);
  auto stream = request_stream::create(co_await asio::this_coro::executor);
  std::vector<int64_t> ids;
  if (!err) err = submit_all(ctx, *lease, embedding_requests(lease->model(), inputs), stream, ids, "input");
  if (err) {
    (lease ? lease->metrics() : ctx.models->default_metrics()).count_rejected(rejection_reason(*err));
    ex.finish_reason = "rejected";
    auto res = make_api_error_response(shape, *err, v);
    co_await io.write_response(ex, std::move(res));
    co_return;
  }
  for (const auto& in : inputs) ex.prompt_tokens += static_cast<int64_t>(in.size());
  const model_lease& m = *lease;
  io.watch_disconnect([&m, stream, ids] {
    cancel_generation(m, ids);
    stream->interrupt();
  });
  std::vector<std::vector<float>> vectors(inputs.size());
  size_t n_done = 0;
  std::string failure;
  while (n_done < inputs.size() && !stream->interrupted()) {
    for (tagged_event& t : co_await stream->next(std::chrono::seconds(60))) {
      if (t.ev.type == engine_event::kind::tokens) continue;
      ++n_done;
      if (t.ev.type == engine_event::kind::error) {
        m.metrics().count_error();
        failure = t.ev.error;
      } else if (t.ev.reason != finish_reason::stop) {
        failure = "the request was aborted";  // shutdown cancels in-flight requests
      } else {
        vectors[static_cast<size_t>(t.choice)] = std::move(t.ev.embedding);
      }
    }
  }
  io.unwatch();
  if (stream->interrupted()) {
    m.metrics().count_cancelled();
    ex.finish_reason = "abort";
    co_return;  // the client is gone
  }
  if (!failure.empty()) {
    cancel_generation(m, ids);
    ex.finish_reason = "error";
    const api::api_error e{500, failure, "server_error", "", ""};
    auto res = make_api_error_response(shape, e, v);
    co_await io.write_response(ex, std::move(res));
    co_return;
  }
  ex.finish_reason = "stop";
  auto res = make_json_response(http::status::ok, format_answer(api, vectors, r, m.model().name, ex.prompt_tokens, ex.t_start), v);
  co_await io.write_response(ex, std::move(res));
}

}  // namespace spate
