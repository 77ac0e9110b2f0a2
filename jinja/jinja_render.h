// A parsed Jinja2 template and its evaluator. Semantics follow Python Jinja2 3.1 in an
// ImmutableSandboxedEnvironment with trim_blocks / lstrip_blocks and the loopcontrols
// extension (how Hugging Face and vLLM render chat templates): Jinja2's scoping (loop bodies,
// macros, set/filter/with blocks get their own scope, if does not; locals that start undefined
// per jinja_symbols.h), late-bound macro closures, Python values and operators (jinja_value.h,
// jinja_ops.h), the sandbox's refusal of mutating methods, and Jinja2's constant folding
// (which decides whether a slice of a constant is lenient).
//
// Thread-safety: a template is immutable after construction; render() may be called from
// several threads at once (each call has its own render_context).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/jinja_ast.h"
#include "jinja/jinja_context.h"

namespace spate::jinja {

inline constexpr std::size_t k_max_source_bytes = 1u << 20;

class compiled_template {
 public:
  // Throws syntax_error. Source longer than k_max_source_bytes is refused; invalid UTF-8 is
  // replaced by U+FFFD.
  explicit compiled_template(std::string_view source);

  // Renders with `vars` as the template's context variables (besides the globals range, dict,
  // namespace, raise_exception, strftime_now). The values must have been created for this
  // render (values hold per-render mutable state). Throws runtime_error / limit_error (with the
  // template line) or raised_error (raise_exception).
  std::string render(render_context& ctx, std::vector<std::pair<std::string, value>> vars) const;

 private:
  template_ast ast_;
};

}  // namespace spate::jinja
