#include "server/api_models.h"

#include <boost/json.hpp>

#include "server/api_router.h"
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
  m["root"] = r.spec.parent.empty() ? r.spec.id : r.spec.parent;
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

// The "model" of a {"model": ID} body, or the 400 that refuses it.
std::optional<api::api_error> model_field(std::string_view body, std::string& id) {
  boost::system::error_code ec;
  json::parse_options po;
  po.max_depth = 16;
  const json::value v = json::parse(body, ec, {}, po);
  if (ec || !v.is_object()) {
    return api::api_error{400, ec ? "malformed JSON: " + ec.message() : "the body must be a JSON object", "invalid_request_error", "",
                          "invalid_json"};
  }
  const json::value* m = v.as_object().if_contains("model");
  if (!m || !m->is_string() || m->as_string().empty()) {
    return api::api_error{400, "'model' must be a non-empty string", "invalid_request_error", "model", ""};
  }
  id = std::string(m->as_string());
  return std::nullopt;
}

}  // namespace

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
  const std::string_view id = params.get("id");
  const std::optional<model_row> r = ctx.models->find(id);
  if (!r) {
    co_await io.write_response(ex, make_error_response(http::status::not_found, "The model '" + std::string(id) + "' does not exist",
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
    model_acquired got = co_await acquire_model(ctx, id, {}, std::chrono::seconds(1), /*explicit_load=*/true);
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
