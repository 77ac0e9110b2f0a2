// JSON Schema "integer" and "number": exact digit-range grammars for bounds
// (json_schema.h). Bounds are computed in 128-bit integers so that int64,
// uint64 and large doubles clamp without overflow; magnitudes are limited to
// k_max_integer_digits (19) digits.
#include <algorithm>
#include <cmath>
#include <string>

#include "grammar/json_schema.h"
#include "grammar/json_schema_internal.h"

namespace spate::grammar::json_detail {
namespace {

using wide = __int128;

constexpr uint64_t k_max_magnitude = 9999999999999999999ull;  // 19 digits
constexpr wide k_unbounded = static_cast<wide>(k_max_magnitude) + 2;

symbol digits(char lo, char hi) { return bytes_symbol(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)); }

uint64_t pow10(int n) {
  uint64_t p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}

// The numerals of the equal-length digit strings [x, y] (x <= y), each
// alternative prefixed by `prefix`.
void fixed_length_range(const alternative& prefix, std::string_view x, std::string_view y, std::vector<alternative>& out) {
  if (x.empty()) {
    out.push_back(prefix);
    return;
  }
  if (x[0] == y[0]) {
    fixed_length_range(prefix + digits(x[0], x[0]), x.substr(1), y.substr(1), out);
    return;
  }
  const std::string_view xr = x.substr(1), yr = y.substr(1);
  const bool low_full = xr.find_first_not_of('0') == std::string_view::npos;
  const bool high_full = yr.find_first_not_of('9') == std::string_view::npos;
  if (!low_full) fixed_length_range(prefix + digits(x[0], x[0]), xr, std::string(xr.size(), '9'), out);
  const char mid_lo = low_full ? x[0] : static_cast<char>(x[0] + 1);
  const char mid_hi = high_full ? y[0] : static_cast<char>(y[0] - 1);
  if (mid_lo <= mid_hi) {
    alternative a = prefix + digits(mid_lo, mid_hi);
    for (size_t i = 0; i < xr.size(); ++i) a.push_back(digits('0', '9'));
    out.push_back(std::move(a));
  }
  if (!high_full) fixed_length_range(prefix + digits(y[0], y[0]), std::string(yr.size(), '0'), yr, out);
}

// A bound keyword's value as a wide integer rounded toward the inside of the
// range (ceil for lower bounds, floor for upper), clamped to +-k_unbounded.
// integral_only: a non-integer value is an error (number bounds).
wide bound_value(const boost::json::value& v, bool lower, bool integral_only, const std::string& ptr) {
  if (v.is_int64()) return v.get_int64();
  if (v.is_uint64()) return v.get_uint64() > k_max_magnitude ? k_unbounded : static_cast<wide>(v.get_uint64());
  if (!v.is_double()) schema_fail(ptr, "must be a number");
  const double d = v.get_double();
  if (integral_only && d != std::floor(d)) {
    schema_fail(ptr, "bounds on type number must be integer-valued (this grammar cannot express " + json_literal(v, ptr) + ")");
  }
  const double r = lower ? std::ceil(d) : std::floor(d);
  if (r >= 1e20) return k_unbounded;
  if (r <= -1e20) return -k_unbounded;
  return static_cast<wide>(r);
}

struct bounds {
  wide lo = -k_unbounded, hi = k_unbounded;  // for numbers: the bound values
  bool lo_incl = true, hi_incl = true;
  bool any = false;            // some bound keyword present
  std::string lo_ptr, hi_ptr;  // where the effective bounds come from
};

// Reads minimum/maximum/exclusiveMinimum/exclusiveMaximum (numbers; or the
// draft-4 booleans modifying minimum/maximum), keeping the tighter bound.
bounds read_bounds(const boost::json::object& s, const std::string& ptr, bool integral_only) {
  bounds b;
  b.lo_ptr = b.hi_ptr = ptr;
  const auto flag = [&](std::string_view key) {
    const auto* v = s.if_contains(key);
    return v != nullptr && v->is_bool() && v->get_bool();
  };
  for (const char* key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
    const auto* v = s.if_contains(key);
    if (v == nullptr) continue;
    const std::string kp = pointer_child(ptr, key);
    const std::string_view k = key;
    const bool lower = k.find("inimum") != std::string_view::npos;
    const bool exclusive_kw = k.starts_with("exclusive");
    if (exclusive_kw && v->is_bool()) continue;  // draft 4: applied with minimum/maximum
    const bool exclusive = exclusive_kw || flag(lower ? "exclusiveMinimum" : "exclusiveMaximum");
    const wide x = bound_value(*v, lower, integral_only, kp);
    const bool rounded = v->is_double() && v->get_double() != std::floor(v->get_double());
    b.any = true;
    if (lower && (x > b.lo || (x == b.lo && exclusive && !rounded))) {
      b.lo = x, b.lo_incl = !exclusive || rounded, b.lo_ptr = kp;
    } else if (!lower && (x < b.hi || (x == b.hi && exclusive && !rounded))) {
      b.hi = x, b.hi_incl = !exclusive || rounded, b.hi_ptr = kp;
    }
  }
  return b;
}

wide clamp_magnitude(wide v) { return v > static_cast<wide>(k_max_magnitude) ? static_cast<wide>(k_max_magnitude) : v; }

// sign + the numerals of [lo, hi] (clamped to the 19-digit range) + tail, if not empty.
void add_range(std::vector<alternative>& out, const char* sign, wide lo, wide hi, const alternative& tail) {
  if (lo < 0) lo = 0;
  hi = clamp_magnitude(hi);
  if (lo > hi) return;
  for (alternative& a : digit_range(static_cast<uint64_t>(lo), static_cast<uint64_t>(hi))) {
    out.push_back(grammar_builder::literal(sign) + a + tail);
  }
}

// ".", then 1..k_max_fraction_digits digits, some digit non-zero:
//   nz_1 ::= [1-9]    nz_n ::= [1-9] any_{n-1} | "0" nz_{n-1}
//   any_0 ::= ""      any_j ::= [0-9] any_{j-1} | ""
alternative fraction_nonzero(grammar_builder& b) {
  std::vector<int32_t> any{b.add_helper({{}})};
  for (int j = 1; j < k_max_fraction_digits; ++j) any.push_back(b.add_helper({{digits('0', '9'), ref(any.back())}, {}}));
  int32_t nz = b.add_helper({{digits('1', '9')}});
  for (int n = 2; n <= k_max_fraction_digits; ++n) {
    nz = b.add_helper({{digits('1', '9'), ref(any[static_cast<size_t>(n - 1)])}, {digits('0', '0'), ref(nz)}});
  }
  return grammar_builder::literal(".") + ref(nz);
}

}  // namespace

std::vector<alternative> digit_range(uint64_t lo, uint64_t hi) {
  std::vector<alternative> out;
  const int lo_len = static_cast<int>(std::to_string(lo).size());
  const int hi_len = static_cast<int>(std::to_string(hi).size());
  for (int n = lo_len; n <= hi_len; ++n) {
    const uint64_t a = std::max(lo, n == 1 ? 0 : pow10(n - 1));
    const uint64_t z = n == 20 ? hi : std::min(hi, pow10(n) - 1);
    if (a > z) continue;
    fixed_length_range({}, std::to_string(a), std::to_string(z), out);
  }
  return out;
}

alternative integer_schema(grammar_builder& b, const json_rules& r, const boost::json::object& s, const std::string& ptr) {
  const bounds bd = read_bounds(s, ptr, false);
  if (!bd.any) return {ref(r.integer)};
  const wide lo = bd.lo_incl ? bd.lo : bd.lo + 1;
  const wide hi = bd.hi_incl ? bd.hi : bd.hi - 1;
  std::vector<alternative> alts;
  add_range(alts, "-", std::max<wide>(1, -hi), -lo, {});  // negatives, by magnitude; never "-0"
  add_range(alts, "", lo, hi, {});
  if (alts.empty()) schema_fail(bd.lo_ptr != ptr ? bd.lo_ptr : bd.hi_ptr, "no integer satisfies the bounds (with at most 19 digits)");
  return b.group(std::move(alts));
}

alternative number_schema(grammar_builder& b, const json_rules& r, const boost::json::object& s, const std::string& ptr) {
  const bounds bd = read_bounds(s, ptr, true);
  if (!bd.any) return {ref(r.number)};
  // A number is sign, integer part I and fraction f; bounds L, H are integers.
  // f == 0 (none or ".000"): the value is +-I, checked like an integer.
  // 0 < f < 1: +(I+f) is >= L and > L iff I >= L, <= H and < H iff I <= H-1;
  //            -(I+f) is >= L and > L iff I <= -L-1, <= H and < H iff I >= -H.
  const wide lz = bd.lo_incl ? bd.lo : bd.lo + 1, hz = bd.hi_incl ? bd.hi : bd.hi - 1;
  const alternative zero_frac = b.group({grammar_builder::literal(".") + b.repeat({digits('0', '0')}, 1, k_max_fraction_digits), {}});
  const alternative frac = fraction_nonzero(b);
  std::vector<alternative> alts;
  add_range(alts, "-", std::max<wide>(1, -hz), -lz, zero_frac);
  add_range(alts, "-", -bd.hi, -bd.lo - 1, frac);
  add_range(alts, "", lz, hz, zero_frac);
  add_range(alts, "", bd.lo, bd.hi - 1, frac);
  if (alts.empty()) schema_fail(bd.lo_ptr != ptr ? bd.lo_ptr : bd.hi_ptr, "no number satisfies the bounds (with at most 19 integer digits)");
  return b.group(std::move(alts));
}

}  // namespace spate::grammar::json_detail
