// Hands a prepared generation to the engine: one engine request per choice,
// whose events flow into the session's request_stream.
//
// Thread-safety: any I/O thread (engine::submit/cancel are thread-safe).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "protocol/generation.h"
#include "server/http_io.h"
#include "server/request_stream.h"
#include "server/server_context.h"

namespace spate {

// Submits the choices to m's engine (its metrics count the generated tokens): n per prompt (a completions request may carry several
// prompts; choice c is prompt c / n's sample c % n, which uses seed + c % n
// when a seed was given). On a
// refusal, already-submitted choices are cancelled and the error returned
// (429 with Retry-After semantics when the queue is full, 400 context_length
// for what can never fit, 503 when stopping). ids receives the engine ids.
std::optional<api::api_error> submit_generation(server_context& ctx, const model_lease& m, const prepared_generation& g,
                                                const std::shared_ptr<request_stream>& stream, std::vector<int64_t>& ids);

// Submits the requests in order, request i's events as choice i of stream;
// on a refusal, cancels the ones already submitted and returns the refusal's
// error (refusal_error). ids receives the engine ids. More requests than the
// engine ever queues (--max-queued-requests) are refused before any is
// submitted with a 400 naming the limit and `param` (what multiplied them):
// a 429 would invite retries that can never succeed.
std::optional<api::api_error> submit_all(server_context& ctx, const model_lease& m, std::vector<engine_request> reqs,
                                         const std::shared_ptr<request_stream>& stream, std::vector<int64_t>& ids,
                                         std::string_view param);

void cancel_generation(const model_lease& m, const std::vector<int64_t>& ids);

// While generating, a client that closes the connection cancels the engine
// requests ids of m and interrupts stream (the pump then ends): RAII over
// io.watch_disconnect / io.unwatch. Strand only; m outlives the watch.
class disconnect_watch {
 public:
  disconnect_watch(const model_lease& m, http_io& io, std::shared_ptr<request_stream> stream, std::vector<int64_t> ids) : io_(io) {
    io_.watch_disconnect([&m, stream = std::move(stream), ids = std::move(ids)] {
      cancel_generation(m, ids);
      stream->interrupt();
    });
  }
  ~disconnect_watch() { io_.unwatch(); }
  disconnect_watch(const disconnect_watch&) = delete;
  disconnect_watch& operator=(const disconnect_watch&) = delete;

 private:
  http_io& io_;
};

// The answer to an engine refusal: 429 queue_full, 503 shutting_down, 400
// context_length_exceeded, else 400.
api::api_error refusal_error(const server_context& ctx, const submit_result& sr);

// The spate:request_rejected_total reason of a refusal, the same on every
// path (HTTP and WebSocket): "context_length" (code context_length_exceeded),
// "queue_full" (429) or "invalid".
const char* rejection_reason(const api::api_error& e);

}  // namespace spate
