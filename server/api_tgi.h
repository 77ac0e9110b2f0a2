// TGI's native API (text-generation-inference; protocol/tgi_request.h and
// tgi_format.h): POST /generate (one JSON answer), POST /generate_stream
// (SSE), POST / (either, by the body's "stream"; the non-streamed answer is
// a one-element array, as TGI's) and GET /info. Requests name no model: they
// run on the default model (the only one, or the first --model), or on
// parameters.adapter_id when given (a model or LoRA adapter id). Errors are
// TGI's {"error", "error_type"}; every refusal is decided before a stream
// header is sent. A client that disconnects cancels its engine request.
//
// Thread-safety: the handlers run on the connection's strand.
#pragma once

#include "server/route_table.h"

namespace spate {

void add_tgi_routes(route_table& t);

}  // namespace spate
