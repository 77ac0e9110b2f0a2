#include "jinja/jinja_args.h"

#include "jinja/jinja_error.h"

namespace spate::jinja {

bound_args::bound_args(std::string_view fname, call_args& args, std::initializer_list<const char*> params)
    : vals_(params.size()) {
  const std::string f(fname);
  if (args.args.size() > params.size())
    throw runtime_error(f + "() takes at most " + std::to_string(params.size()) + " argument" +
                        (params.size() == 1 ? "" : "s") + " (" + std::to_string(args.args.size()) + " given)");
  for (std::size_t i = 0; i < args.args.size(); ++i) vals_[i] = args.args[i];
  for (auto& [k, v] : args.kwargs) {
    std::size_t i = 0;
    for (const char* p : params) {
      if (k == p) break;
      ++i;
    }
    if (i == params.size()) throw runtime_error(f + "() got an unexpected keyword argument " + py_str_repr(k));
    if (vals_[i]) throw runtime_error(f + "() got multiple values for argument " + py_str_repr(k));
    vals_[i] = v;
  }
}

void no_kwargs(const call_args& args, const char* fname) {
  if (!args.kwargs.empty())
    throw runtime_error(std::string(fname) + "() got an unexpected keyword argument " +
                        py_str_repr(args.kwargs[0].first));
}

std::int64_t int_arg(const value& v) {
  if (v.is_int_like()) return v.as_int();
  if (v.is_undefined()) raise_undefined(v);
  throw runtime_error(py_str_repr(type_name(v)) + " object cannot be interpreted as an integer");
}

std::optional<std::int64_t> opt_int_arg(const value& v) {
  if (v.is_none()) return std::nullopt;
  return int_arg(v);
}

const std::string& str_arg(const value& v, const char* what) {
  if (v.is_string()) return v.str();
  if (v.is_undefined()) raise_undefined(v);
  throw runtime_error(std::string(what) + " must be str, not " + type_name(v));
}

}  // namespace spate::jinja
