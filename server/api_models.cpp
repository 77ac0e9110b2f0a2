#include "server/api_models.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <chrono>

#include "server/api_router.h"
#include "server/lora_paths.h"
#include "server/model_wait.h"

namespace spate {

namespace json = boost::json;

namespace {

json::object model_object(const server_context& ctx, const model_row& r) {
  json::object m;
  m["id"] = r.spec.id;
  m["object"] = "model";
  m["created"] = ctx.created_unix_s;
  m["owned_by"] = "spate";
  m["root"] = r.spec.parent.empty() ? r.spec.id : r.spec.path;  // vLLM: an adapter's root is its path
  m["parent"] = r.spec.parent.empty() ? json::value(nullptr) : json::value(r.spec.parent);
  m["max_model_len"] = r.max_model_len;
  json::object st;
  st["value"] = model_status_name(r.status);
  if (r.status == model_status::error) st["error"] = r.error;
  m["status"] = std::move(st);
  m["pinned"] = r.spec.pinned;
  return m;
}

http::response<http::string_body> error_response(const api::api_error& e, unsigned v) {
  return make_error_response(static_cast<http::status>(e.status), e.message, e.code, v, e.param);
}

// String fields of a small JSON object body: each of `required` must be a
// non-empty string; `optional` ones may be absent. Fills values in the same
// order (absent: ""). Returns the 400 that refuses the body.
std::optional<api::api_error> string_fields(std::string_view body, std::initializer_list<const char*> required,
                                            std::initializer_list<const char*> optional, std::vector<std::string>& values) {
  boost::system::error_code ec;
  json::parse_options po;
  po.max_depth = 16;
  const json::value v = json::parse(body, ec, {}, po);
  if (ec || !v.is_object()) {
    return api::api_error{400, ec ? "malformed JSON: " + ec.message() : "the body must be a JSON object", "invalid_request_error", "",
                          "invalid_json"};
  }
  values.clear();
  for (const char* k : required) {
    const json::value* f = v.as_object().if_contains(k);
    if (!f || !f->is_string() || f->as_string().empty())
      return api::api_error{400, "'" + std::string(k) + "' must be a non-empty string", "invalid_request_error", k, ""};
    values.emplace_back(f->as_string());
  }
  for (const char* k : optional) {
    const json::value* f = v.as_object().if_contains(k);
    if (f && !f->is_null() && !f->is_string())
      return api::api_error{400, "'" + std::string(k) + "' must be a string", "invalid_request_error", k, ""};
    values.emplace_back(f && f->is_string() ? std::string(f->as_string()) : std::string());
  }
  return std::nullopt;
}

std::optional<api::api_error> model_field(std::string_view body, std::string& id) {
  std::vector<std::string> v;
  if (auto err = string_fields(body, {"model"}, {}, v)) return err;
  id = v[0];
  return std::nullopt;
}

// Waits (strand) for an adapter install's outcome, up to the load timeout.
boost::asio::awaitable<std::optional<api::api_error>> add_adapter(server_context& ctx, model_spec spec) {
  struct state {
    explicit state(boost::asio::any_io_executor e) : ex(e), wake(e) {}
    boost::asio::any_io_executor ex;
    boost::asio::steady_timer wake;
    bool done = false;
    std::optional<api::api_error> err;
  };
  auto st = std::make_shared<state>(co_await boost::asio::this_coro::executor);
  const std::string name = spec.id;
  if (auto err = ctx.models->add_adapter(std::move(spec), [st](std::optional<api::api_error> e) {
        boost::asio::post(st->ex, [st, e = std::move(e)]() mutable {
          st->done = true;
          st->err = std::move(e);
          st->wake.cancel();
        });
      })) {
    co_return err;
  }
  st->wake.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(ctx.opts.model_load_timeout_s)));
  co_await st->wake.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
  if (!st->done)
    co_return api::api_error{503, "the LoRA adapter '" + name + "' did not load within --model-load-timeout", "server_error", "", "model_load_timeout"};
  co_return st->err;
}

}  // namespace

boost::asio::awaitable<void> handle_lora_adapter(server_context& ctx, http_exchange& ex, http_io& io, bool load) {
  const unsigned v = ex.req.version();
  std::vector<std::string> f;
  std::optional<api::api_error> err;
  if (!ctx.opts.enable_lora_runtime_loading) {  // vLLM: the routes exist only with VLLM_ALLOW_RUNTIME_LORA_UPDATING
    err = api::api_error{404, "runtime LoRA loading is off: start the server with --enable-lora-runtime-loading and --lora-allowed-dirs",
                         "not_found_error", "", "lora_runtime_loading_disabled"};
  } else {
    err = load ? string_fields(ex.req.body(), {"lora_name", "lora_path"}, {"base_model_name"}, f)
               : string_fields(ex.req.body(), {"lora_name"}, {}, f);
  }
  if (!err && !valid_adapter_name(f[0]))  // names are logged and listed: no forged log lines
    err = api::api_error{400, "'lora_name' must be 1 to 256 characters of UTF-8 without control characters", "invalid_request_error",
                         "lora_name", ""};
  std::optional<std::string> path;
  if (!err && load && !(path = confine_lora_path(f[1], ctx.opts.lora_allowed_roots)))
    err = api::api_error{403, "'lora_path' is not allowed: adapters are loaded from the --lora-allowed-dirs directories only",
                         "permission_error", "lora_path", "lora_path_not_allowed"};
  if (!err && load) {
    model_spec spec;
    spec.id = f[0];
    spec.path = *path;  // resolved: the file below an allowed directory that was checked
    spec.parent = f[2];
    err = co_await add_adapter(ctx, std::move(spec));
  } else if (!err) {
    err = ctx.models->remove_adapter(f[0]);
  }
  if (err) {
    co_await io.write_response(ex, error_response(*err, v));
    co_return;
  }
  http::response<http::string_body> res{http::status::ok, v};
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  res.body() = "Success: LoRA adapter '" + f[0] + (load ? "' added successfully." : "' removed successfully.");
  co_await io.write_response(ex, std::move(res));
}

boost::asio::awaitable<void> handle_models(server_context& ctx, http_exchange& ex, http_io& io) {
  json::array data;
  for (const model_row& r : ctx.models->list()) data.push_back(model_object(ctx, r));
  json::object body;
  body["object"] = "list";
  body["data"] = std::move(data);
  co_await io.write_response(ex, make_json_response(http::status::ok, json::serialize(body), ex.req.version()));
}

boost::asio::awaitable<void> handle_model(server_context& ctx, http_exchange& ex, http_io& io, const route_params& params) {
  const unsigned v = ex.req.version();
  // Clients percent-encode ids with spaces, '/' or non-ASCII characters.
  const std::optional<std::string> id = percent_decode(params.get("id"));
  if (!id) {
    co_await io.write_response(ex, make_error_response(http::status::bad_request,
                                                       "the model id in the path is not valid percent-encoded UTF-8 (a '%' must "
                                                       "start a %XX escape of two hex digits)",
                                                       "", v, "model"));
    co_return;
  }
  const std::optional<model_row> r = ctx.models->find(*id);
  if (!r) {
    co_await io.write_response(ex, make_error_response(http::status::not_found, "The model '" + *id + "' does not exist",
                                                       "model_not_found", v, "model"));
    co_return;
  }
  co_await io.write_response(ex, make_json_response(http::status::ok, json::serialize(model_object(ctx, *r)), v));
}

boost::asio::awaitable<void> handle_model_load(server_context& ctx, http_exchange& ex, http_io& io, bool load) {
  const unsigned v = ex.req.version();
  std::string id;
  std::optional<api::api_error> err = model_field(ex.req.body(), id);
  if (!err && load) {
    model_acquired got = co_await acquire_model(ctx, id, nullptr, std::chrono::seconds(1), /*explicit_load=*/true);
    err = std::move(got.error);
  } else if (!err) {
    err = ctx.models->unload(id);
  }
  if (err) {
    co_await io.write_response(ex, error_response(*err, v));
    co_return;
  }
  co_await io.write_response(ex, make_json_response(http::status::ok, "{\"success\":true}", v));
}

}  // namespace spate
