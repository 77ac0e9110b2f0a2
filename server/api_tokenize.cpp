#include "server/api_tokenize.h"

#include <boost/json.hpp>

#include "tokenizer/tokenizer.h"
#include "server/api_router.h"
#include "server/model_wait.h"
#include "protocol/generation.h"
#include "protocol/openai_request.h"
#include "util/utf8.h"

namespace spate {

namespace json = boost::json;

namespace {

http::response<http::string_body> error_response(const api::api_error& e, unsigned version) {
  return make_error_response(static_cast<http::status>(e.status), e.message, e.code, version, e.param);
}

}  // namespace

// The lease on the request's model, or the error to answer with.
static boost::asio::awaitable<model_acquired> model_of(server_context& ctx, const std::optional<api::api_error>& parse_error,
                                                const std::string& model) {
  if (parse_error) co_return model_acquired{nullptr, parse_error};
  co_return co_await acquire_model(ctx, model, nullptr, std::chrono::seconds(1));
}

boost::asio::awaitable<void> handle_tokenize(server_context& ctx, http_exchange& ex, http_io& io, bool tokenize) {
  const unsigned v = ex.req.version();
  json::object out;
  if (tokenize) {
    api::tokenize_request r;
    const model_acquired got = co_await model_of(ctx, api::parse_tokenize(ex.req.body(), r), r.model);
    auto err = got.error;
    std::string text;
    std::vector<int32_t> ids;
    if (!err) {
      const tokenizer& tok = *got.lease->model().tok;
      if (r.prompt) {
        text = *r.prompt;
        ids = tok.encode(text, r.add_special_tokens, /*parse_special=*/true);
      } else {
        // The chat's own rendering (tools included), so that the count is the chat's usage.prompt_tokens.
        api::parsed_request chat;
        chat.kind = api::endpoint::chat_completions;
        chat.messages = std::move(r.messages);
        chat.template_extra = std::move(r.template_extra);
        chat.add_generation_prompt = r.add_generation_prompt;
        chat.continue_final_message = r.continue_final_message;
        chat.tool_use = std::move(r.tool_use);
        prepared_generation g;
        api::output_constraint constraint;
        err = render_chat_prompt(got.lease->model(), chat, g, constraint);
        ids = std::move(g.prompt);
      }
    }
    if (err) {
      co_await io.write_response(ex, error_response(*err, v));
      co_return;
    }
    json::array arr;
    for (int32_t t : ids) arr.push_back(t);
    out["count"] = static_cast<int64_t>(ids.size());
    out["max_model_len"] = got.lease->model().max_model_len;
    out["tokens"] = std::move(arr);
  } else {
    api::detokenize_request r;
    const model_acquired got = co_await model_of(ctx, api::parse_detokenize(ex.req.body(), r), r.model);
    auto err = got.error;
    const tokenizer* tok_p = got.lease ? got.lease->model().tok : nullptr;
    if (!err) {
      const tokenizer& tok = *tok_p;
      for (size_t i = 0; i < r.tokens.size(); ++i) {
        if (r.tokens[i] < 0 || r.tokens[i] >= tok.n_vocab()) {
          err = api::api_error{400, "token id " + std::to_string(r.tokens[i]) + " is outside the vocabulary [0, " + std::to_string(tok.n_vocab()) + ")",
                               "invalid_request_error", "tokens[" + std::to_string(i) + "]", ""};
          break;
        }
      }
    }
    if (err) {
      co_await io.write_response(ex, error_response(*err, v));
      co_return;
    }
    out["prompt"] = utf8::sanitize(tok_p->decode(r.tokens, /*skip_special=*/false));
  }
  co_await io.write_response(ex, make_json_response(http::status::ok, json::serialize(out), v));
}

}  // namespace spate
