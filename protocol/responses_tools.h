// The Responses API's function tools and function-call input items, turned
// into their chat-completions equivalents (which the chat template and the
// rest of the pipeline know):
//   tools: {"type":"function","name","description"?,"parameters"?,"strict"?}
//       -> {"type":"function","function":{"name","description","parameters"}}
//   input {"type":"function_call","call_id","name","arguments"}
//       -> an assistant message with tool_calls (consecutive calls join one message)
//   input {"type":"function_call_output","call_id","output"}
//       -> {"role":"tool","tool_call_id","content"}
// Pure functions; any thread.
#pragma once

#include <boost/json.hpp>
#include <optional>
#include <string>

#include "protocol/openai_request.h"

namespace spate::api {

std::optional<api_error> convert_responses_tools(const boost::json::value& tools, boost::json::array& out);

// item.type is "function_call" or "function_call_output"; ip names the item ("input[3]").
std::optional<api_error> convert_function_call_item(const boost::json::object& item, const std::string& ip,
                                                    boost::json::array& messages);

}  // namespace spate::api
