#include "protocol/ws_protocol.h"

#include <boost/json.hpp>


namespace spate {

namespace json = boost::json;

std::optional<api::api_error> ws_parse_event(std::string_view msg, ws_create& out) {
  // Type check first, so an unknown event gets a precise error; then the
  // fields go through the same parser as POST /v1/responses.
  boost::system::error_code ec;
  json::parse_options po;
  po.max_depth = 64;
  json::value v = json::parse(msg, ec, {}, po);
  if (ec || !v.is_object()) {
    return api::api_error{400, ec ? "malformed JSON: " + ec.message() : "an event must be a JSON object", "invalid_request_error", "",
                          "invalid_json"};
  }
  json::object& o = v.as_object();
  const json::value* type = o.if_contains("type");
  if (!type || !type->is_string()) {
    return api::api_error{400, "an event needs a string 'type'", "invalid_request_error", "type", "missing_type"};
  }
  if (type->as_string() != "response.create") {
    return api::api_error{400, "unknown event type '" + std::string(type->as_string()) + "'; expected 'response.create'",
                          "invalid_request_error", "type", "unknown_event_type"};
  }
  o.erase("type");
  o.erase("stream");     // implicit over WebSocket
  o.erase("stream_id");  // WebSocket envelope metadata
  if (auto err = api::parse_request(api::endpoint::responses, json::serialize(o), out.req)) return err;
  out.req.stream = true;
  return std::nullopt;
}

std::optional<api::api_error> ws_prepare(const api::served_model& m, ws_create& out) {
  if (auto err = api::validate_for_model(out.req, m.n_vocab)) return err;
  return prepare_generation(m, out.req, out.gen);
}

std::optional<api::api_error> ws_parse_message(const api::served_model& m, std::string_view msg, ws_create& out) {
  if (auto err = ws_parse_event(msg, out)) return err;
  return ws_prepare(m, out);
}

std::string ws_error_event(const api::api_error& e, int64_t sequence_number) {
  json::object o;
  o["type"] = "error";
  o["code"] = e.code.empty() ? json::value(nullptr) : json::value(e.code);
  o["message"] = e.message;
  o["param"] = e.param.empty() ? json::value(nullptr) : json::value(e.param);
  o["sequence_number"] = sequence_number;
  json::object err;
  err["type"] = e.type;
  err["code"] = o["code"];
  err["message"] = e.message;
  err["param"] = o["param"];
  o["error"] = std::move(err);
  o["status"] = e.status;
  return json::serialize(o);
}

}  // namespace spate
