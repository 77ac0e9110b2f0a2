// Binding of call arguments to Python-style signatures for the built-in functions, filters,
// tests and methods, with Python's TypeError messages.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/jinja_value.h"

namespace spate::jinja {

class bound_args {
 public:
  // params: parameter names in order. Positional arguments fill them first, keyword arguments
  // by name. Throws runtime_error for surplus / unknown / duplicate arguments.
  bound_args(std::string_view fname, call_args& args, std::initializer_list<const char*> params);

  bool has(std::size_t i) const { return vals_[i].has_value(); }
  const value& get(std::size_t i) const { return *vals_[i]; }
  // The argument, or `dflt` when not given.
  value get_or(std::size_t i, value dflt) const { return has(i) ? *vals_[i] : std::move(dflt); }

 private:
  std::vector<std::optional<value>> vals_;
};

// Throws TypeError when keyword arguments were given to a function that takes none.
void no_kwargs(const call_args& args, const char* fname);
// Python int argument (int or bool); throws TypeError otherwise.
std::int64_t int_arg(const value& v);
// Optional int argument: None -> nullopt.
std::optional<std::int64_t> opt_int_arg(const value& v);
// str argument; throws TypeError naming `what` otherwise.
const std::string& str_arg(const value& v, const char* what);

}  // namespace spate::jinja
