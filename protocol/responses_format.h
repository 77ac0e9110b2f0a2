// The OpenAI Responses API objects and streaming events for one text response,
// shared by POST /v1/responses (SSE) and its WebSocket mode. Each event is
// returned as (type, JSON text); SSE writes "event: TYPE\ndata: JSON\n\n",
// WebSocket sends the JSON as one text message.
//
// Event order: response.created, response.in_progress,
// response.output_item.added, response.content_part.added,
// response.output_text.delta*, response.output_text.done,
// response.content_part.done, response.output_item.done, and then
// response.completed (or response.incomplete when max_output_tokens ended it,
// or response.failed on an engine error).
//
// Not thread-safe; one instance per response, used on one strand.
#pragma once

#include <boost/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine_api.h"
#include "protocol/openai_request.h"

namespace spate {

using api_event = std::pair<std::string, std::string>;  // (type, JSON)

class response_builder {
 public:
  response_builder(std::string response_id, std::string message_id, std::string model, int64_t created_at,
                   const api::parsed_request& req);

  std::vector<api_event> begin();
  api_event delta(std::string_view text);
  // reason stop/length; usage from the finished event.
  std::vector<api_event> finish(finish_reason reason, const request_usage& usage);
  std::vector<api_event> fail(std::string_view message);

  // The whole response object in its current state (non-streaming body).
  boost::json::object response_object() const;
  const std::string& text() const { return text_; }

 private:
  api_event make(std::string type, boost::json::object o);
  boost::json::object message_item(bool done) const;
  boost::json::object text_part() const;
  // {"item_id", "output_index", "content_index"} of the one text part.
  boost::json::object part_address() const;

  std::string id_, msg_id_, model_;
  int64_t created_at_;
  boost::json::value instructions_, max_output_tokens_, temperature_, top_p_;
  std::string status_ = "in_progress";
  std::string text_;
  std::string incomplete_reason_;
  std::string error_;
  bool has_usage_ = false;
  request_usage usage_;
  int64_t seq_ = 0;
};

}  // namespace spate
