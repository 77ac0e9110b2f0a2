// Tokenizer for Jinja2 template source, reproducing jinja2.lexer with the environment
// Hugging Face uses for chat templates: default delimiters ({{ }}, {% %}, {# #}),
// trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False, newline "\n".
// That covers whitespace control ({%- -%} {{- -}} {#- -#} and the + modifiers), raw blocks,
// comments, string escapes (Python's unicode-escape), int/float literals with underscores,
// and bracket balancing inside tags.
//
// Input must be valid UTF-8. Throws syntax_error (with line) on malformed input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spate::jinja {

enum class tok : std::uint8_t {
  data,            // template text; text = the text
  variable_begin,  // {{
  variable_end,    // }}
  block_begin,     // {%
  block_end,       // %}
  name,            // identifier; text = name
  string,          // string literal; text = decoded value
  integer,         // ival
  floating,        // fval
  op,              // operator; text = "+", "//", "(", ...
  eof
};

struct token {
  tok type;
  int line;
  std::string text;
  std::int64_t ival = 0;
  double fval = 0;
};

// Always ends with an eof token.
std::vector<token> tokenize(std::string_view source);

}  // namespace spate::jinja
