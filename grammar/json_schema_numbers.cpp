// JSON Schema "integer" and "number": exact digit-range grammars for bounds
// (json_schema.h). Bounds are computed in 128-bit integers so that int64,
// uint64 and large doubles clamp without overflow; magnitudes are limited to
// k_max_integer_digits (19) digits.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <string>

#include "grammar/json_schema.h"
#include "grammar/json_schema_internal.h"

namespace spate::grammar::json_detail {
namespace {

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
wide bound_value(const boost::json::value& v, bool lower, const std::string& ptr) {
  if (v.is_int64()) return v.get_int64();
  if (v.is_uint64()) return v.get_uint64() > k_max_magnitude ? k_unbounded : static_cast<wide>(v.get_uint64());
  if (!v.is_double()) schema_fail(ptr, "must be a number");
  const double d = v.get_double();
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
bounds read_bounds(const boost::json::object& s, const std::string& ptr) {
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
    const wide x = bound_value(*v, lower, kp);
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

// A decimal bound: |value| = ip "." fp, fp without trailing zeros; huge:
// more than 19 integer digits (beyond every generated number).
struct decimal {
  bool neg = false, huge = false;
  uint64_t ip = 0;
  std::string fp;
};

decimal to_decimal(const boost::json::value& v, const std::string& ptr) {
  decimal d;
  if (v.is_int64()) {
    d.neg = v.get_int64() < 0;
    d.ip = d.neg ? 0 - static_cast<uint64_t>(v.get_int64()) : static_cast<uint64_t>(v.get_int64());
  } else if (v.is_uint64()) {
    d.ip = v.get_uint64();
  } else if (v.is_double()) {
    char buf[512];  // shortest fixed notation: at most 309 integer or 330 fraction digits
    const auto res = std::to_chars(buf, buf + sizeof buf, v.get_double(), std::chars_format::fixed);
    std::string_view t(buf, static_cast<size_t>(res.ptr - buf));
    d.neg = t.starts_with('-');
    if (d.neg) t.remove_prefix(1);
    const size_t dot = std::min(t.find('.'), t.size());
    const std::string_view int_part = t.substr(0, dot);
    d.fp = std::string(t.substr(std::min(dot + 1, t.size())));
    while (!d.fp.empty() && d.fp.back() == '0') d.fp.pop_back();
    d.huge = int_part.size() > static_cast<size_t>(k_max_integer_digits);
    if (!d.huge) d.ip = std::stoull(std::string(int_part));
  } else {
    schema_fail(ptr, "must be a number");
  }
  d.huge = d.huge || d.ip > k_max_magnitude;
  if (d.fp.size() > static_cast<size_t>(k_max_fraction_digits)) {
    schema_fail(ptr, "a bound with more than " + std::to_string(k_max_fraction_digits) + " fraction digits is not supported");
  }
  if (!d.huge && d.ip == 0 && d.fp.empty()) d.neg = false;
  return d;
}

// Compares magnitudes (signs ignored).
int compare_magnitude(const decimal& a, const decimal& b) {
  if (a.huge || b.huge) return a.huge == b.huge ? 0 : a.huge ? 1 : -1;
  if (a.ip != b.ip) return a.ip < b.ip ? -1 : 1;
  return a.fp == b.fp ? 0 : a.fp < b.fp ? -1 : 1;  // no trailing zeros: lexicographic order is numeric
}

int sign_of(const decimal& d) { return d.neg ? -1 : (!d.huge && d.ip == 0 && d.fp.empty()) ? 0 : 1; }

int compare(const decimal& a, const decimal& b) {
  if (sign_of(a) != sign_of(b)) return sign_of(a) < sign_of(b) ? -1 : 1;
  return a.neg ? -compare_magnitude(a, b) : compare_magnitude(a, b);
}

struct bound {
  bool present = false;
  decimal d;
  bool strict = false;
  std::string ptr;
};

// The fractions ("" or "." 1..k_max_fraction_digits digits, value 0.d) of a
// magnitude whose integer part equals the lower bound's (lt) and/or the
// upper bound's (ht): a digit-by-digit automaton, state (digits written,
// still equal to the lower bound's digits, still equal to the upper's).
class fraction_range {
 public:
  fraction_range(grammar_builder& b, const bound& lo, const bound& hi)
      : b_(b), a_(lo.d.fp), b_digits_(hi.present ? hi.d.fp : ""), a_strict_(lo.strict), b_strict_(hi.strict) {}

  alternative optional_fraction(bool lt, bool ht) {
    std::vector<alternative> alts;
    if (can_end(0, lt, ht)) alts.emplace_back();
    std::vector<alternative> first = digit_steps(0, lt, ht);
    if (!first.empty()) alts.push_back(grammar_builder::literal(".") + b_.group(std::move(first)));
    if (alts.empty()) return {bytes_symbol(1, 0)};  // an empty byte set: matches nothing (pruned)
    return alts.size() == 1 && alts[0].empty() ? alternative{} : b_.group(std::move(alts));
  }

 private:
  // The value 0.d with d = pos digits equal to the bounds' prefixes: padded
  // with zeros it equals the lower bound iff pos >= |a|, the upper iff pos >= |b|.
  bool can_end(size_t pos, bool lt, bool ht) const {
    if (lt && (pos < a_.size() || a_strict_)) return false;
    return !(ht && pos >= b_digits_.size() && b_strict_);
  }

  std::vector<alternative> digit_steps(size_t pos, bool lt, bool ht) {
    std::vector<alternative> out;
    if (pos >= static_cast<size_t>(k_max_fraction_digits)) return out;
    const char lo = lt && pos < a_.size() ? a_[pos] : '0';
    const char hi = ht ? (pos < b_digits_.size() ? b_digits_[pos] : '0') : '9';
    // Digits in [lo, hi]; the first stays tight on the lower bound, the last on the upper.
    for (char c = lt ? lo : '0'; c <= hi;) {
      const bool nlt = lt && c == lo, nht = ht && c == hi;
      char end = c;
      while (end + 1 <= hi && (lt && end + 1 == lo) == nlt && (ht && end + 1 == hi) == nht) ++end;
      out.push_back({digits(c, end), ref(state(pos + 1, nlt, nht))});
      c = static_cast<char>(end + 1);
    }
    return out;
  }

  int32_t state(size_t pos, bool lt, bool ht) {
    const size_t key = pos * 4 + (lt ? 2 : 0) + (ht ? 1 : 0);
    if (const auto it = states_.find(key); it != states_.end()) return it->second;
    const int32_t id = b_.declare_rule("." + std::to_string(b_.n_rules()));
    states_.emplace(key, id);
    std::vector<alternative> alts = digit_steps(pos, lt, ht);
    if (can_end(pos, lt, ht)) alts.emplace_back();
    b_.set_alts(id, std::move(alts));
    return id;
  }

  grammar_builder& b_;
  std::string a_, b_digits_;
  bool a_strict_, b_strict_;
  std::map<size_t, int32_t> states_;
};

// Magnitudes "I" or "I.f" (I at most 19 digits) in the range lo .. hi (hi
// absent: unbounded), prefixed by sign.
void add_magnitudes(grammar_builder& b, std::vector<alternative>& out, const char* sign, const bound& lo, const bound& hi) {
  if (lo.d.huge) return;
  const bool bounded = hi.present && !hi.d.huge;
  if (bounded) {
    const int c = compare_magnitude(lo.d, hi.d);
    if (c > 0 || (c == 0 && (lo.strict || hi.strict))) return;
  }
  fraction_range frac(b, lo, bounded ? hi : bound{});
  const alternative any_frac = frac.optional_fraction(false, false);
  const alternative s = grammar_builder::literal(sign);
  const auto numeral = [](uint64_t v) { return digit_range(v, v).front(); };
  if (bounded && lo.d.ip == hi.d.ip) {
    out.push_back(s + numeral(lo.d.ip) + frac.optional_fraction(true, true));
    return;
  }
  out.push_back(s + numeral(lo.d.ip) + frac.optional_fraction(true, false));
  const uint64_t top = bounded ? hi.d.ip : k_max_magnitude + 1;
  if (lo.d.ip + 1 < top) {
    for (alternative& a : digit_range(lo.d.ip + 1, top - 1)) out.push_back(s + a + any_frac);
  }
  if (bounded) out.push_back(s + numeral(hi.d.ip) + frac.optional_fraction(false, true));
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

namespace {

// |d| * 10^k as an integer, rounded up (lower bounds) or down (upper); a
// strict bound that is exact moves by one. Beyond `top` when d is huge.
wide scaled(const decimal& d, int k, bool up, bool strict, wide top) {
  if (d.huge) return up ? top + 1 : top;
  wide v = d.ip;
  for (int i = 0; i < k; ++i) v = v * 10 + (static_cast<size_t>(i) < d.fp.size() ? d.fp[static_cast<size_t>(i)] - '0' : 0);
  const bool inexact = d.fp.size() > static_cast<size_t>(k);  // fp has no trailing zeros
  if (inexact) return up ? v + 1 : v;
  if (strict) return up ? v + 1 : v - 1;
  return v;
}

// multipleOf with the bounds, if any (json_schema_multiple_of.cpp).
alternative integer_multiple_schema(grammar_builder& b, const boost::json::object& s, const std::string& ptr) {
  const multiple_of m = integer_multiple(read_multiple_of(s.at("multipleOf"), pointer_child(ptr, "multipleOf")));
  const bounds bd = read_bounds(s, ptr);
  const wide lo = bd.lo_incl ? bd.lo : bd.lo + 1;
  const wide hi = bd.hi_incl ? bd.hi : bd.hi - 1;
  std::vector<alternative> alts = multiple_of_numbers(b, m, false, {{"", lo, hi}, {"-", std::max<wide>(1, -hi), -lo}});
  if (alts.empty()) schema_fail(m.ptr, "no integer (of at most 19 digits) within the bounds is a multiple of it");
  return b.group(std::move(alts));
}

alternative number_multiple_schema(grammar_builder& b, const boost::json::object& s, const std::string& ptr, const bound& lo, const bound& hi) {
  const multiple_of m = read_multiple_of(s.at("multipleOf"), pointer_child(ptr, "multipleOf"));
  wide top = 1;
  for (int i = 0; i < k_max_integer_digits + m.k; ++i) top *= 10;
  // x >= 0: N = x 10^k in [lo, hi]; x < 0: M = -x 10^k in [max(1, -hi), -lo].
  const wide pos_lo = lo.present && !lo.d.neg ? scaled(lo.d, m.k, true, lo.strict, top) : 0;
  const wide pos_hi = !hi.present ? top : hi.d.neg ? -1 : scaled(hi.d, m.k, false, hi.strict, top);
  const wide neg_lo = hi.present && hi.d.neg ? scaled(hi.d, m.k, true, hi.strict, top) : 1;
  const wide neg_hi = !lo.present ? top : lo.d.neg ? scaled(lo.d, m.k, false, lo.strict, top) : 0;
  std::vector<alternative> alts = multiple_of_numbers(b, m, true, {{"", pos_lo, pos_hi}, {"-", std::max<wide>(1, neg_lo), neg_hi}});
  if (alts.empty()) schema_fail(m.ptr, "no number (of at most 19 integer digits) within the bounds is a multiple of it");
  return b.group(std::move(alts));
}

}  // namespace

alternative integer_schema(grammar_builder& b, const json_rules& r, const boost::json::object& s, const std::string& ptr) {
  if (s.contains("multipleOf")) return integer_multiple_schema(b, s, ptr);
  const bounds bd = read_bounds(s, ptr);
  if (!bd.any) return {ref(r.integer)};
  const wide lo = bd.lo_incl ? bd.lo : bd.lo + 1;
  const wide hi = bd.hi_incl ? bd.hi : bd.hi - 1;
  std::vector<alternative> alts;
  add_range(alts, "-", std::max<wide>(1, -hi), -lo, {});  // negatives, by magnitude; never "-0"
  add_range(alts, "", lo, hi, {});
  if (alts.empty()) schema_fail(bd.lo_ptr != ptr ? bd.lo_ptr : bd.hi_ptr, "no integer satisfies the bounds (with at most 19 digits)");
  return b.group(std::move(alts));
}

// Reads one side's bound: minimum/exclusiveMinimum (lower) or maximum/
// exclusiveMaximum (upper), numbers or draft-4 booleans; the tighter one wins.
bound read_decimal_bound(const boost::json::object& s, const std::string& ptr, bool lower) {
  const char* plain = lower ? "minimum" : "maximum";
  const char* excl = lower ? "exclusiveMinimum" : "exclusiveMaximum";
  bound out;
  const auto* e = s.if_contains(excl);
  const bool draft4 = e != nullptr && e->is_bool() && e->get_bool();
  for (const char* key : {plain, excl}) {
    const auto* v = s.if_contains(key);
    if (v == nullptr || v->is_bool()) continue;
    bound cand{true, to_decimal(*v, pointer_child(ptr, key)), key == excl || draft4, pointer_child(ptr, key)};
    const int c = out.present ? compare(cand.d, out.d) : 0;
    if (!out.present || (lower ? c > 0 : c < 0) || (c == 0 && cand.strict)) out = cand;
  }
  return out;
}

alternative number_schema(grammar_builder& b, const json_rules& r, const boost::json::object& s, const std::string& ptr) {
  const bound lo = read_decimal_bound(s, ptr, true), hi = read_decimal_bound(s, ptr, false);
  if (s.contains("multipleOf")) return number_multiple_schema(b, s, ptr, lo, hi);
  if (!lo.present && !hi.present) return {ref(r.number)};
  // Non-negative numbers are magnitudes m = x; negative ones are "-" m with
  // m = -x > 0 (no "-0"), so x >= L becomes m <= -L and x <= H becomes m >= -H.
  std::vector<alternative> alts;
  const auto magnitude = [](const bound& x) { bound m = x; m.d.neg = false; return m; };
  const bool lo_neg = lo.present && lo.d.neg, hi_neg = hi.present && hi.d.neg;
  const bool hi_zero_strict = hi.present && sign_of(hi.d) == 0 && hi.strict;
  if (!hi_neg && !hi_zero_strict) {
    const bound pos_lo = lo.present && !lo_neg ? lo : bound{};
    add_magnitudes(b, alts, "", pos_lo, hi.present ? hi : bound{});
  }
  if (!lo.present || lo_neg) {
    bound neg_lo = hi_neg ? magnitude(hi) : bound{};
    if (!hi_neg) neg_lo.strict = true;  // m > 0
    add_magnitudes(b, alts, "-", neg_lo, lo.present ? magnitude(lo) : bound{});
  }
  if (alts.empty()) schema_fail(lo.present ? lo.ptr : hi.ptr, "no number satisfies the bounds (with at most 19 integer digits)");
  return b.group(std::move(alts));
}

}  // namespace spate::grammar::json_detail
