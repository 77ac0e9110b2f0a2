// Placeholder interface (lead): the Jinja chat-template renderer is being written; see jinja_*.
#pragma once
#include <boost/json.hpp>
#include <cstdint>
#include <stdexcept>
#include <string>
namespace spate {
struct chat_template_error : std::runtime_error { using std::runtime_error::runtime_error; };
struct chat_template_options {
  bool add_generation_prompt = true;
  boost::json::object extra_context;
  std::int64_t now_unix_s = -1;
};
class chat_template {
 public:
  chat_template(std::string source, std::string bos_token, std::string eos_token);
  std::string render(const boost::json::array& messages, const chat_template_options& opts) const;
};
}  // namespace spate
