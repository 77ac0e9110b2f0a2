// libFuzzer target: the Jinja renderer. Input: template source, a NUL byte,
// then a JSON value: its "messages" (an array) and every other key of an
// object go to the template (the rest of a non-object is ignored). Template
// syntax and render errors are answers (chat_template_error); the renderer's
// own limits (steps, output, nesting) keep every input bounded.
#include <boost/json.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "jinja/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spate;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string src(in.substr(0, nul));
  boost::json::array messages;
  chat_template_options opts;
  opts.now_unix_s = 0;
  if (nul != std::string_view::npos) {
    boost::system::error_code ec;
    boost::json::value ctx = boost::json::parse(in.substr(nul + 1), ec);
    if (!ec && ctx.is_object()) {
      for (auto& kv : ctx.as_object()) {
        if (kv.key() == "messages" && kv.value().is_array()) messages = kv.value().as_array();
        else if (kv.key() != "messages") opts.extra_context[kv.key()] = kv.value();
      }
    }
  }
  try {
    const chat_template t(src, "<s>", "</s>");
    (void)t.render(messages, opts);
  } catch (const chat_template_error&) {
  }
  return 0;
}
