// Chat templates: renders a model's Jinja2 chat template (tokenizer.chat_template) over an
// OpenAI-style list of messages, byte for byte as Hugging Face transformers / vLLM do with
// Python's Jinja2 (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols,
// globals raise_exception and strftime_now, transformers' tojson).
//
// Template variables: messages, bos_token, eos_token, add_generation_prompt, tools and
// documents (None unless given, as transformers passes them), plus every key of
// options.extra_context (which may override tools / documents but not the other four).
//
// Not supported: the tags block, extends, include, import, from and autoescape and recursive
// for loops (syntax error when constructing); the filters filesizeformat, groupby, pprint,
// random, striptags, urlencode, urlize, wordwrap and xmlattr (syntax error, or an error when
// reached inside an if, as Jinja2 does for unknown filters); lipsum() (error when called).
// Integers are 64-bit (overflow is an error; JSON integers beyond int64 become floats).
// Generators, functions and methods print without a memory address ("<generator object>").
// Unicode: case mappings and str.isprintable follow Python 3.11's tables (Unicode 14);
// str.isalpha / isdigit / isalnum are exact for ASCII only.
//
// Limits per render (chat_template_error when exceeded): 16 MiB of output, 16 MiB for any
// single string, 128 MiB of strings and lists built in total, 5,000,000 steps (statements
// executed + loop iterations + calls), 64 nested macro calls, 1 MiB of native stack for the
// evaluator, value nesting depth 256, range() of at most 100,000 items (as Jinja2's sandbox).
// Templates: at most 1 MiB of source, statements / parentheses nested at most 100 deep,
// expressions at most 200 nodes deep. Rendering needs about 1.5 MiB of thread stack at most
// (threads normally have 8 MiB).
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include <boost/json.hpp>

namespace spate {

namespace jinja {
class compiled_template;
}

struct chat_template_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct chat_template_options {
  bool add_generation_prompt = true;
  boost::json::object
      extra_context;             // e.g. "tools", "documents", "enable_thinking"... passed through as template variables
  std::int64_t now_unix_s = -1;  // strftime_now clock; -1 = real time (tests pin it)
};

class chat_template {
 public:
  // Parses the Jinja source once. Throws chat_template_error("...line N...") on a syntax error.
  chat_template(std::string source, std::string bos_token, std::string eos_token);
  ~chat_template();
  chat_template(chat_template&&) noexcept;
  chat_template& operator=(chat_template&&) noexcept;

  // Renders with `messages` (the client's list of message objects as given, e.g. {"role":..., "content":...,
  // "tool_calls":[...]}), bos_token, eos_token, add_generation_prompt and extra_context as variables.
  // Thread-safe (const, no shared mutable state). Throws chat_template_error carrying the template's own
  // message for raise_exception(...), and a clear message for runtime errors (unknown filter, type error,
  // undefined attribute access on undefined, recursion/output limits). Never crashes, never loops forever:
  // enforces the limits documented above.
  std::string render(const boost::json::array& messages, const chat_template_options& opts) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::string bos_token_;
  std::string eos_token_;
  std::unique_ptr<const jinja::compiled_template> tpl_;
};

}  // namespace spate
