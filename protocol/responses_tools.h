// The Responses API's function tools and function-call input items, turned
// into their chat-completions equivalents (which the chat template and the
// rest of the pipeline know):
//   tools: {"type":"function","name","description"?,"parameters"?,"strict"?}
//       -> {"type":"function","function":{"name","description","parameters"}}
//   input {"type":"function_call","call_id","name","arguments"}
//       -> an assistant message with tool_calls (consecutive calls join one message)
//   input {"type":"function_call_output","call_id","output"}
//       -> {"role":"tool","tool_call_id","content"}
//   input {"type":"reasoning","content":[{"type":"reasoning_text","text"}],"summary":[...]}
//       -> an assistant message with reasoning_content (the content parts'
//          texts joined; the summary's when there is no content), which the
//          assistant turn that follows (its message or function calls)
//          joins, as the reasoning of an earlier turn (gpt-oss's template
//          renders it as that turn's analysis); encrypted_content is refused
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

// item.type is "reasoning".
std::optional<api_error> convert_reasoning_item(const boost::json::object& item, const std::string& ip,
                                                boost::json::array& messages);

// The last message when it is a turn that only holds reasoning so far (a
// reasoning item's): the assistant message or calls that follow join it. Null otherwise.
boost::json::object* open_reasoning_turn(boost::json::array& messages);

}  // namespace spate::api
