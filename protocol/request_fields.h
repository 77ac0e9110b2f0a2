// The fields of the OpenAI and vLLM request bodies that spate does not
// implement. Nothing is silently ignored: such a field is refused with a 400
// naming it, unless its value is the one that means "off" (so SDKs that send
// defaults keep working), or it is on the short list of fields accepted and
// ignored on purpose (docs/api.md, "Unsupported and ignored fields", lists them and why). Keys in neither list
// and not parsed by the endpoint are unknown: ignored and logged at debug, as
// they belong to no API we implement.
//
// Pure functions; any thread.
#pragma once

#include <boost/json.hpp>
#include <optional>
#include <string_view>

#include "protocol/openai_request.h"

namespace spate::api {

// The 400 for the first refused field of body (in the table's order), if any.
// n: the request's n (best_of equal to n is what vLLM does anyway).
std::optional<api_error> refuse_unsupported_fields(endpoint kind, const boost::json::object& body, int32_t n);

// Accepted and ignored on purpose (user, metadata, store, ...).
bool is_ignored_on_purpose(endpoint kind, std::string_view key);
// A field of the tables above (ignored on purpose, or refused unless off):
// known, so never reported as unknown.
bool is_listed_field(endpoint kind, std::string_view key);

}  // namespace spate::api
