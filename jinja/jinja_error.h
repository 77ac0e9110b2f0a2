// Exceptions thrown by the Jinja renderer (lexer, parser, evaluator). All derive from
// template_error; chat_template.cpp turns them into chat_template_error.
#pragma once

#include <stdexcept>
#include <string>

namespace spate::jinja {

struct template_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Lexing / parsing failed. what() is the bare message; line is 1-based.
struct syntax_error : template_error {
  syntax_error(const std::string& msg, int line_no) : template_error(msg), line(line_no) {}
  int line;
};

// Evaluation failed: type errors, undefined access, unknown names, sandbox violations and
// exceeded limits. what() is the bare message; line is the template line being evaluated
// (0 when unknown), filled in by the renderer as the exception unwinds.
struct runtime_error : template_error {
  explicit runtime_error(const std::string& msg, int line_no = 0) : template_error(msg), line(line_no) {}
  int line;
};

// A resource limit (output size, work, recursion) was exceeded.
struct limit_error : runtime_error {
  using runtime_error::runtime_error;
};

// raise_exception(message) was called by the template; what() is exactly the message.
struct raised_error : template_error {
  using template_error::template_error;
};

}  // namespace spate::jinja
