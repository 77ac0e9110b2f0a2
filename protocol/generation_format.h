// Turning a request's engine events into what its API sends back: one
// formatter per API (completions and chat completions in
// completions_format.h, Responses in responses_format.h), written once for
// every transport. A formatter is fed the start of the response, every engine
// event tagged with its choice index (n > 1), and the end; it returns the
// streaming events to send and, non-streaming, the final body or the error.
//
// Transports frame the events: SSE writes sse_frame(e) (`data: JSON` or
// `event: TYPE` + data), the WebSocket mode sends e.data as one text message.
//
// Thread-safety: a formatter is not thread-safe; one per request, used on one
// strand (or one thread). Nothing here blocks or does I/O.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine_api.h"
#include "protocol/generation.h"
#include "protocol/openai_request.h"
#include "protocol/served_model.h"

namespace spate {

// One streaming event. type is "" for a plain SSE `data:` chunk (completions,
// chat, the usage chunk and the final "[DONE]"), else the Responses event type.
struct stream_event {
  std::string type;
  std::string data;  // JSON text, or "[DONE]"
};
using stream_events = std::vector<stream_event>;

// "data: DATA\n\n", or "event: TYPE\ndata: DATA\n\n" when e.type is set.
std::string sse_frame(const stream_event& e);

// The non-streaming outcome: the JSON body (ok), or the message of the engine
// error that failed the request (answered as a 500 server_error).
struct final_body {
  bool ok = true;
  std::string body;   // ok: the serialized JSON
  std::string error;  // !ok: the message
};

// What one choice has produced so far; the same accumulation serves the
// non-streaming formatters and `spate generate`.
struct choice_accumulator {
  std::string text;
  std::vector<int32_t> token_ids;       // generated ids (a final EOS included)
  std::vector<token_logprob> logprobs;  // one per token when requested
  int32_t completion_tokens = 0;        // counted from tokens events; the finished event's usage replaces it
  finish_reason reason = finish_reason::none;
  request_usage usage;                  // from the finished event
  std::string error;                    // set by an error event ("internal error" when the engine gave none)
  bool done = false;                    // finished or error seen

  // Adds one event of this choice. keep_content=false counts tokens but keeps
  // neither text, ids nor logprobs (a streaming response already sent them).
  void add(const engine_event& e, bool keep_content = true);
};

class generation_formatter {
 public:
  virtual ~generation_formatter() = default;

  // Streaming events before any engine event (chat's role deltas, echo,
  // response.created...). Non-streaming: nothing.
  virtual stream_events begin() = 0;
  // One engine event of choice `choice` (in [0, n)); the streaming events it
  // yields (non-streaming: nothing, the event is accumulated).
  virtual stream_events on_event(int32_t choice, const engine_event& e) = 0;
  // True once every choice has finished or failed.
  virtual bool done() const = 0;
  // Streaming events after done() (usage chunk, "[DONE]"); may be empty.
  virtual stream_events end() = 0;
  // Non-streaming: the final body or the error. Precondition: done().
  virtual final_body result() const = 0;

  // For the access log: generated tokens so far and the OpenAI finish reason
  // ("error" once an engine error failed a choice, "" before the end).
  virtual int32_t completion_tokens() const = 0;
  virtual std::string finish_reason_text() const = 0;
};

// Makes a fresh id with the given prefix ("chatcmpl", "cmpl", "resp", "msg").
using id_maker = std::function<std::string(const char* prefix)>;

// The formatter for r's endpoint. created: Unix seconds. m and g must outlive it.
std::unique_ptr<generation_formatter> make_formatter(const api::served_model& m, const api::parsed_request& r,
                                                     const prepared_generation& g, const id_maker& make_id, int64_t created);

// {"prompt_tokens", "completion_tokens", "total_tokens"[, "prompt_tokens_details": {"cached_tokens"}]}.
boost::json::object usage_json(int32_t prompt_tokens, int32_t completion_tokens, int32_t cached_tokens);

}  // namespace spate
