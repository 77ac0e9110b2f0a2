// Values of the Jinja renderer, modelled on the Python objects Jinja2 templates see, so that
// printing, comparing and serializing them matches Python byte for byte: None, bool, int
// (64-bit), float, str (UTF-8, indexed by code point; optionally markupsafe.Markup), list,
// tuple, dict (insertion-ordered), dict views, range, lazy generators (what filters such as
// map/select return), jinja2's Namespace, macros, built-in functions / bound methods, and the
// loop object.
//
// A value is a small handle (kind + scalar or shared object). Copies share the object, as
// Python references do. Objects are immutable once built except: list (pop/clear, which the
// immutable sandbox allows), namespace attributes, generator and loop state. Mutable objects
// are created during one render and never shared between renders; templates hold only
// immutable constants, so a parsed template may be rendered from several threads at once.
//
// Nesting depth of list/tuple/dict values is bounded (k_max_value_depth): building a deeper
// value throws, which keeps the recursive printers, comparisons and destructors bounded.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/json/fwd.hpp>

namespace spate::jinja {

class render_context;
struct frame;
struct macro_def;
struct str_obj;
struct seq_obj;
struct dict_obj;

inline constexpr int k_max_value_depth = 256;

enum class kind : std::uint8_t {
  undefined,
  none,
  boolean,
  integer,
  floating,
  string,
  list,
  tuple,
  dict,
  dict_view,
  range,
  generator,
  namespace_,
  macro,
  builtin,
  loop
};

struct object {
  virtual ~object() = default;
};

class value {
 public:
  value() noexcept : kind_(kind::undefined) {}

  static value none() noexcept {
    value v;
    v.kind_ = kind::none;
    return v;
  }
  static value boolean(bool b) noexcept {
    value v;
    v.kind_ = kind::boolean;
    v.u_.b = b;
    return v;
  }
  static value integer(std::int64_t i) noexcept {
    value v;
    v.kind_ = kind::integer;
    v.u_.i = i;
    return v;
  }
  static value floating(double d) noexcept {
    value v;
    v.kind_ = kind::floating;
    v.u_.d = d;
    return v;
  }
  static value string(std::string s, bool markup = false);
  // Undefined values carrying the message raised when they are misused.
  static value undefined_hint(std::string hint);
  static value undefined_name(std::string name);
  static value undefined_attr(const value& owner, std::string name);
  static value undefined_key(const value& owner, const value& key);
  static value undefined_unsafe(const value& owner, const std::string& name);
  // Containers; throw runtime_error when nesting exceeds k_max_value_depth.
  static value list(std::vector<value> items);
  static value tuple(std::vector<value> items);
  static value dict(std::shared_ptr<dict_obj> d);
  static value from_object(kind k, std::shared_ptr<object> o) noexcept;

  kind type() const noexcept { return kind_; }
  bool is(kind k) const noexcept { return kind_ == k; }
  bool is_undefined() const noexcept { return kind_ == kind::undefined; }
  bool is_none() const noexcept { return kind_ == kind::none; }
  bool is_string() const noexcept { return kind_ == kind::string; }
  bool is_markup() const noexcept { return kind_ == kind::string && markup_; }
  bool is_int_like() const noexcept { return kind_ == kind::integer || kind_ == kind::boolean; }
  bool is_number() const noexcept { return is_int_like() || kind_ == kind::floating; }
  bool is_seq() const noexcept { return kind_ == kind::list || kind_ == kind::tuple; }

  bool as_bool() const noexcept { return u_.b; }
  // Integer value of an int or bool.
  std::int64_t as_int() const noexcept { return kind_ == kind::boolean ? (u_.b ? 1 : 0) : u_.i; }
  // Float value of an int, bool or float.
  double as_float() const noexcept { return kind_ == kind::floating ? u_.d : static_cast<double>(as_int()); }
  inline const std::string& str() const noexcept;  // precondition: is_string()
  inline const str_obj& str_data() const noexcept;
  inline seq_obj& seq() const noexcept;        // precondition: is_seq()
  inline dict_obj& dict_ref() const noexcept;  // precondition: is(kind::dict)
  template <class T>
  T& as() const noexcept {
    return *static_cast<T*>(obj_.get());
  }
  const std::shared_ptr<object>& ptr() const noexcept { return obj_; }
  int depth() const noexcept;  // nesting depth of containers, 0 for scalars
  bool same_object(const value& o) const noexcept { return obj_ && obj_ == o.obj_; }

 private:
  kind kind_;
  bool markup_ = false;
  union {
    bool b;
    std::int64_t i;
    double d;
  } u_{};
  std::shared_ptr<object> obj_;
};

// Why a value is undefined: the message raised when the undefined value is misused
// (UndefinedError, or SecurityError for a method the sandbox refuses).
struct undefined_info : object {
  std::string hint;
};

struct str_obj : object {
  explicit str_obj(std::string text);
  std::string s;
  bool ascii;
  std::size_t cp_len;  // length in code points
};

struct seq_obj : object {  // list and tuple
  std::vector<value> items;
  int depth = 1;
};

struct dict_obj : object {
  std::vector<std::pair<value, value>> items;
  int depth = 1;
  // Python dict assignment: an existing equal key keeps its position. Key must be hashable.
  void set(value key, value v);
  const value* find(const value& key) const;
  const value* find(std::string_view key) const;

 private:
  std::unordered_map<std::string_view, std::size_t> index_;  // string keys, once size > 8
};

struct view_obj : object {  // dict_items / dict_keys / dict_values
  enum which_t : std::uint8_t { items, keys, values };
  value dict;
  which_t which;
};

struct range_obj : object {
  std::int64_t start, stop, step;
  std::int64_t size() const;
  std::int64_t at(std::int64_t i) const { return start + i * step; }
};

// A lazy iterator (Python generator / iterator object). pull() yields the next item or
// returns false once exhausted.
struct gen_obj : object {
  std::string type_name = "generator";
  std::function<bool(value&)> pull;
  bool done = false;
  bool running = false;
  int depth = 1;  // length of the chain of generators feeding this one
};

struct ns_obj : object {  // jinja2.utils.Namespace
  std::vector<std::pair<std::string, value>> attrs;
  value* find(std::string_view name);
  void set(const std::string& name, value v);
};

struct macro_obj : object {
  const macro_def* def;            // owned by the template, which outlives the render
  std::string name;                // empty for a call block's caller
  std::shared_ptr<frame> closure;  // scope the macro was defined in
};

struct call_args {
  std::vector<value> args;
  std::vector<std::pair<std::string, value>> kwargs;
};

using builtin_fn = value (*)(render_context& ctx, const value& self, call_args& args);

struct builtin_obj : object {  // a global function or a bound method
  std::string name;
  builtin_fn fn = nullptr;
  value self;  // the bound object for methods (undefined for functions)
  bool is_method = false;
};

// Pulls the items of an iterable value, as Python's iter() / next(). Lists are iterated by
// index over the live list (as CPython does); undefined iterates as empty.
class value_iter {
 public:
  // Throws runtime_error "'int' object is not iterable" for non-iterables.
  value_iter(const value& v, render_context& ctx);
  bool next(value& out);
  // len() of the source if it has one (list, tuple, str, dict, view, range), else nullopt.
  std::optional<std::int64_t> source_size() const;

 private:
  value src_;
  std::size_t pos_ = 0;
  render_context* ctx_;
};

struct loop_obj : object {  // jinja2.runtime.LoopContext
  std::unique_ptr<value_iter> it;
  std::int64_t index0 = -1;
  std::optional<std::int64_t> length;
  std::deque<value> lookahead;  // items pulled early by nextitem / last / length
  value prev, cur;
  bool has_changed = false;
  value last_changed;
  int depth0 = 0;
  bool tracked = false;   // registered with the render_context (see jinja_context.h)
  bool next(value& out);  // advances the loop
  bool peek(value& out);  // the next item without advancing
  std::int64_t get_length();
};

inline const std::string& value::str() const noexcept { return static_cast<const str_obj*>(obj_.get())->s; }
inline const str_obj& value::str_data() const noexcept { return *static_cast<const str_obj*>(obj_.get()); }
inline seq_obj& value::seq() const noexcept { return *static_cast<seq_obj*>(obj_.get()); }
inline dict_obj& value::dict_ref() const noexcept { return *static_cast<dict_obj*>(obj_.get()); }

// Python semantics.
bool truthy(const value& v);
std::string type_name(const value& v);          // type(v).__name__
std::string object_type_repr(const value& v);   // jinja2.utils.object_type_repr
bool py_equal(const value& a, const value& b);  // ==
bool is_hashable(const value& v);
// a < b; throws runtime_error for unorderable operands (and UndefinedError for undefined).
bool py_less(const value& a, const value& b, render_context& ctx);
std::string py_float_repr(double d);
std::string py_str_repr(std::string_view s);               // repr() of a str
std::string to_str(const value& v, render_context& ctx);   // str(v)
std::string to_repr(const value& v, render_context& ctx);  // repr(v)
// len(v); throws runtime_error "object of type 'int' has no len()".
std::int64_t py_len(const value& v, render_context& ctx);
// list(v) for any iterable.
std::vector<value> to_vector(const value& v, render_context& ctx);
// Raises the UndefinedError (or SecurityError) an undefined value carries.
[[noreturn]] void raise_undefined(const value& v);
std::string undefined_message(const value& v);

// JSON -> value (dict / list / str / int / float / bool / None). Strings are sanitized to
// valid UTF-8; integers beyond int64 become floats. Throws runtime_error past the depth limit.
value from_json(const boost::json::value& j);

}  // namespace spate::jinja
