// JSON Schema "multipleOf" (json_schema.h). A number x is a multiple of
// a / 10^k when N = x * 10^k is an integer multiple of a: its digits beyond
// the k-th fraction digit are 0, and the remainder of N mod a, computed digit
// by digit from the most significant one (r -> 10 r + d mod a), ends at 0.
// The grammar is that digit automaton, minimized, in product with the digit
// positions (so numbers stay within k_max_integer_digits integer and
// k_max_fraction_digits fraction digits) and, along the numerals that are
// still equal to a bound's digits, with the bounds (minimum/maximum scaled by
// 10^k, inclusive): the exact intersection of the range and the multiples.
#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/json_schema_internal.h"

namespace spate::grammar::json_detail {
namespace {

constexpr int k_digits = 10;

// The minimal automaton of "the digits read so far form a multiple of a":
// Moore's partition refinement of the remainders 0..a-1. Class 0 holds the
// remainder 0: the start state and the only accepting one.
struct remainder_dfa {
  std::vector<std::array<int32_t, k_digits>> next;  // class x digit -> class
};

struct signature_hash {
  size_t operator()(const std::array<uint32_t, k_digits + 1>& s) const {
    size_t h = 0;
    for (const uint32_t v : s) h = h * 1000003u + v;
    return h;
  }
};

// O(a * 10 * rounds); the rounds are about the digits of a, each splitting
// the classes further until no class splits.
remainder_dfa minimal_remainder_dfa(uint64_t a) {
  const auto step = [a](uint64_t r, int d) { return (r * 10 + static_cast<uint64_t>(d)) % a; };
  std::vector<uint32_t> part(a, 1), next_part(a);
  part[0] = 0;
  size_t n_classes = a > 1 ? 2 : 1;
  for (;;) {
    std::unordered_map<std::array<uint32_t, k_digits + 1>, uint32_t, signature_hash> ids;
    ids.reserve(n_classes * 2);
    for (uint64_t r = 0; r < a; ++r) {  // r = 0 first: its class is 0
      std::array<uint32_t, k_digits + 1> sig{};
      sig[0] = part[r];
      for (int d = 0; d < k_digits; ++d) sig[static_cast<size_t>(d) + 1] = part[step(r, d)];
      const auto id = static_cast<uint32_t>(ids.size());
      next_part[r] = ids.emplace(sig, id).first->second;
    }
    part.swap(next_part);
    if (ids.size() == n_classes) break;
    n_classes = ids.size();
  }
  remainder_dfa dfa;
  dfa.next.resize(n_classes);
  std::vector<bool> seen(n_classes, false);
  for (uint64_t r = 0; r < a; ++r) {
    if (seen[part[r]]) continue;
    seen[part[r]] = true;
    for (int d = 0; d < k_digits; ++d) dfa.next[part[r]][static_cast<size_t>(d)] = static_cast<int32_t>(part[step(r, d)]);
  }
  return dfa;
}

std::string decimal_digits(wide v) {  // v >= 0; "" for 0
  std::string s;
  for (; v > 0; v /= 10) s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
  return s;
}

wide pow10_wide(int n) {
  wide p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}

// How the numerals of one sign split by integer-part length n (1..19): a
// bound constrains a numeral only when it has as many comparison digits
// (n + k) and is not the trivial one for that length (10..0 below, 99..9
// above). The lengths no bound constrains form one range, written by one
// chain of rules; the others (at most two) each get their own.
struct length_plan {
  int loose_lo = 1, loose_hi = 0;  // the unconstrained lengths (empty if lo > hi)
  std::vector<int> tight;          // lengths where a bound constrains the digits
  bool zero = false;               // the integer part "0" is possible
};

length_plan plan_lengths(const std::string& lo, const std::optional<std::string>& hi, int k) {
  const auto trivial_lo = [&] { return lo.size() >= 1 && lo[0] == '1' && lo.find_first_not_of('0', 1) == std::string::npos; };
  const auto trivial_hi = [&] { return hi->find_first_not_of('9') == std::string::npos; };
  length_plan p;
  const int lo_len = static_cast<int>(lo.size()) - k;  // lengths below cannot reach lo
  const int hi_len = hi ? static_cast<int>(hi->size()) - k : k_max_integer_digits;
  p.loose_lo = std::max(1, lo_len <= 0 || trivial_lo() ? lo_len : lo_len + 1);
  p.loose_hi = std::min(k_max_integer_digits, !hi || hi_len <= 0 || trivial_hi() ? hi_len : hi_len - 1);
  for (const int n : {lo_len, hi_len}) {
    if (n >= 1 && n <= std::min(hi_len, k_max_integer_digits) && n >= lo_len && (n < p.loose_lo || n > p.loose_hi) &&
        std::find(p.tight.begin(), p.tight.end(), n) == p.tight.end()) {
      p.tight.push_back(n);
    }
  }
  p.zero = lo.size() <= static_cast<size_t>(k);
  return p;
}

// Builds the magnitudes of one multipleOf, one rule per automaton state. The
// integer phase: between n and n_max integer digits still to write (n = 0:
// '.' or the end may follow); the fraction phase: n fraction digits written
// (first: just after '.', a digit must follow), at n = k the value is
// complete and only 0s may follow. tight_lo / tight_hi: the digits so far
// equal the bound's, so it limits the next digit (then the numeral has
// exactly width_ comparison digits: integer digits and k fraction digits,
// missing ones counting as 0). c: the remainder class. Loose states (neither
// tight) are shared by all lengths and both signs.
class multiple_builder {
 public:
  multiple_builder(grammar_builder& b, const multiple_of& m, bool fraction, remainder_dfa dfa)
      : b_(b), k_(m.k), fraction_(fraction), dfa_(std::move(dfa)) {}

  // The loose integer-phase positions (n, n_max) the plans reach; with the
  // fraction positions, what one remainder class costs at most.
  static size_t positions(const std::vector<length_plan>& plans, int k, bool fraction) {
    std::set<std::pair<int, int>> keys;
    const auto chain = [&](int n, int n_max) {
      for (; n_max >= 0; n = std::max(n - 1, 0), --n_max) keys.emplace(n, n_max);
    };
    for (const length_plan& p : plans) {
      if (p.loose_lo <= p.loose_hi) chain(p.loose_lo - 1, p.loose_hi - 1);
      for (const int n : p.tight) chain(n - 1, n - 1);
      if (p.zero) chain(0, 0);
    }
    return keys.size() + (fraction ? static_cast<size_t>(k) + 1 : 0);
  }

  // Alternatives sign + magnitude for the scaled values in [lo, hi] (digit
  // strings without leading zeros, "" = 0; hi absent: only the digit bound).
  void add(std::vector<alternative>& out, const alternative& sign, const std::string& lo, const std::optional<std::string>& hi, const length_plan& p) {
    if (p.loose_lo <= p.loose_hi) {
      set_width(0, "", "");
      for (auto& [target, set] : digit_steps(st{true, p.loose_lo, p.loose_hi, false, false, false, 0}, '1')) out.push_back(sign + set + ref(target));
    }
    for (const int n : p.tight) {
      const size_t w = static_cast<size_t>(n + k_);
      set_width(w, lo.size() == w ? lo : "", hi && hi->size() == w ? *hi : "");
      for (auto& [target, set] : digit_steps(st{true, n, n, false, !lo_.empty(), !hi_.empty(), 0}, '1')) out.push_back(sign + set + ref(target));
    }
    if (p.zero) {  // integer part "0": the value is the k fraction digits
      const size_t w = static_cast<size_t>(k_);
      const bool th = hi && hi->size() <= w;
      set_width(w, lo.empty() ? "" : std::string(w - lo.size(), '0') + lo, th ? std::string(w - hi->size(), '0') + *hi : "");
      const st s{true, 0, 0, false, !lo.empty(), th, 0};
      if (!dead(s)) out.push_back(sign + grammar_builder::literal("0") + ref(state(s)));
    }
  }

 private:
  struct st {
    bool int_phase = true;
    int n = 0, n_max = 0;
    bool first = false;
    bool tl = false, th = false;
    int32_t c = 0;
  };

  void set_width(size_t w, std::string lo, std::string hi) {
    width_ = w, lo_ = std::move(lo), hi_ = std::move(hi);
    tight_.clear();  // tight states depend on the width and the bounds
  }

  // The comparison digit a tight state reads next.
  size_t position(const st& s) const {
    return s.int_phase ? width_ - static_cast<size_t>(k_ + s.n) : width_ - static_cast<size_t>(k_ - s.n);
  }

  // May the numeral end here: the fraction digits still missing (0s) make
  // the remainder 0 and keep the value >= the lower bound?
  bool end_ok(const st& s) const {
    const int p = s.int_phase ? 0 : s.n;
    int32_t c = s.c;
    for (int i = p; i < k_; ++i) c = dfa_.next[static_cast<size_t>(c)][0];
    if (c != 0) return false;
    return !s.tl || lo_.find_first_not_of('0', width_ - static_cast<size_t>(k_ - p)) == std::string::npos;
  }

  // States that could only end, and cannot (no rule is made for them).
  bool dead(const st& s) const {
    if (s.int_phase) return s.n_max == 0 && !fraction_ && !end_ok(s);
    return s.n == k_ && !end_ok(s);
  }

  // The next digits from state s (the first digit of an integer part: from
  // min_digit on), grouped by the state they lead to.
  std::map<int32_t, symbol> digit_steps(const st& s, char min_digit) {
    const size_t pos = s.tl || s.th ? position(s) : 0;
    const char lo = s.tl ? std::max(lo_[pos], min_digit) : min_digit;
    const char hi = s.th ? hi_[pos] : '9';
    std::map<int32_t, symbol> out;
    for (char d = lo; d <= hi; ++d) {
      st t = s;
      if (s.int_phase) {
        t.n = std::max(s.n - 1, 0), t.n_max = s.n_max - 1;
      } else {
        t.n = s.n + 1;
      }
      t.first = false;
      t.tl = s.tl && d == lo_[pos];
      t.th = s.th && d == hi_[pos];
      t.c = dfa_.next[static_cast<size_t>(s.c)][static_cast<size_t>(d - '0')];
      if (dead(t)) continue;
      symbol& sym = out.try_emplace(state(t), bytes_symbol(1, 0)).first->second;
      sym.set.set(static_cast<uint8_t>(d));
    }
    return out;
  }

  int32_t state(const st& s) {
    const auto key = std::make_tuple(s.int_phase, s.n, s.n_max, s.first, s.tl, s.th, s.c);
    auto& memo = s.tl || s.th ? tight_ : loose_;
    if (const auto it = memo.find(key); it != memo.end()) return it->second;
    const int32_t id = b_.declare_rule("." + std::to_string(b_.n_rules()));
    memo.emplace(key, id);
    std::vector<alternative> alts;
    if (!s.int_phase && s.n == k_) {  // complete: only 0s may follow, up to k_max_fraction_digits in all
      const int room = k_max_fraction_digits - k_;
      const alternative zero = {bytes_symbol('0', '0')};
      alts.push_back(s.first ? zero + b_.repeat(zero, 0, room - 1) : b_.repeat(zero, 0, room));
    } else if (s.int_phase) {
      if (s.n == 0 && end_ok(s)) alts.emplace_back();
      const st frac{false, 0, 0, true, s.tl, s.th, s.c};
      if (s.n == 0 && fraction_ && !dead(frac)) alts.push_back(grammar_builder::literal(".") + ref(state(frac)));
      if (s.n_max > 0) {
        for (auto& [target, set] : digit_steps(s, '0')) alts.push_back({set, ref(target)});
      }
    } else {
      if (!s.first && end_ok(s)) alts.emplace_back();
      for (auto& [target, set] : digit_steps(s, '0')) alts.push_back({set, ref(target)});
    }
    b_.set_alts(id, std::move(alts));
    return id;
  }

  grammar_builder& b_;
  int k_;
  bool fraction_;
  remainder_dfa dfa_;
  size_t width_ = 0;
  std::string lo_, hi_;  // the bounds padded to width_ ("": not tight)
  std::map<std::tuple<bool, int, int, bool, bool, bool, int32_t>, int32_t> loose_, tight_;
};

}  // namespace

multiple_of read_multiple_of(const boost::json::value& v, const std::string& ptr) {
  multiple_of m;
  m.ptr = ptr;
  const std::string limit = "multipleOf without its decimal point is above the limit of " + std::to_string(k_max_multiple_of);
  if (v.is_int64() || v.is_uint64()) {
    if (v.is_int64() && v.get_int64() <= 0) schema_fail(ptr, "must be greater than 0");
    m.a = v.is_int64() ? static_cast<uint64_t>(v.get_int64()) : v.get_uint64();
    if (m.a > k_max_multiple_of) schema_fail(ptr, limit);
    return m;
  }
  if (!v.is_double()) schema_fail(ptr, "must be a number");
  if (!(v.get_double() > 0)) schema_fail(ptr, "must be greater than 0");
  char buf[512];  // shortest fixed notation: at most 309 integer or 330 fraction digits
  const auto res = std::to_chars(buf, buf + sizeof buf, v.get_double(), std::chars_format::fixed);
  const std::string_view t(buf, static_cast<size_t>(res.ptr - buf));
  const size_t dot = std::min(t.find('.'), t.size());
  std::string fp(t.substr(std::min(dot + 1, t.size())));
  while (!fp.empty() && fp.back() == '0') fp.pop_back();
  if (fp.size() > static_cast<size_t>(k_max_multiple_of_fraction_digits)) {
    schema_fail(ptr, "a multipleOf with more than " + std::to_string(k_max_multiple_of_fraction_digits) + " fraction digits is not supported");
  }
  std::string digits = std::string(t.substr(0, dot)) + fp;
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size()));
  if (digits.size() > std::to_string(k_max_multiple_of).size()) schema_fail(ptr, limit);
  m.a = std::stoull(digits);
  m.k = static_cast<int>(fp.size());
  if (m.a > k_max_multiple_of) schema_fail(ptr, limit);
  return m;
}

multiple_of integer_multiple(multiple_of m) {
  for (int i = 0; i < m.k && m.a % 2 == 0; ++i) m.a /= 2;
  for (int i = 0; i < m.k && m.a % 5 == 0; ++i) m.a /= 5;
  m.k = 0;
  return m;
}

std::vector<alternative> multiple_of_numbers(grammar_builder& b, const multiple_of& m, bool fraction, const std::vector<magnitude_range>& sides) {
  const wide top = pow10_wide(k_max_integer_digits + m.k) - 1;  // the largest scaled magnitude written
  const auto a = static_cast<wide>(m.a);
  std::vector<magnitude_range> live;
  for (magnitude_range r : sides) {
    r.lo = std::max<wide>(r.lo, 0), r.hi = std::min(r.hi, top);
    if (r.lo <= r.hi && (r.lo + a - 1) / a * a <= r.hi) live.push_back(r);  // holds a multiple
  }
  if (live.empty()) return {};
  std::vector<std::pair<std::string, std::optional<std::string>>> bounds;
  std::vector<length_plan> plans;
  for (const magnitude_range& r : live) {
    bounds.emplace_back(decimal_digits(r.lo), r.hi == top ? std::nullopt : std::optional(decimal_digits(r.hi)));
    plans.push_back(plan_lengths(bounds.back().first, bounds.back().second, m.k));
  }
  // The classes are at least the part of a prime to 10 (those remainders
  // are all distinguishable): checked before minimizing, which costs O(a).
  const size_t positions = multiple_builder::positions(plans, m.k, fraction);
  uint64_t coprime = m.a;
  while (coprime % 2 == 0) coprime /= 2;
  while (coprime % 5 == 0) coprime /= 5;
  const auto too_big = [&](size_t n_classes) {
    schema_fail(m.ptr, "multipleOf needs a digit automaton of " + std::to_string(n_classes * positions) + " states (" + std::to_string(n_classes) +
                           " remainder classes x " + std::to_string(positions) + " digit positions), above the limit of " +
                           std::to_string(k_max_multiple_of_states));
  };
  if (coprime * positions > k_max_multiple_of_states) too_big(coprime);
  remainder_dfa dfa = minimal_remainder_dfa(m.a);
  if (dfa.next.size() * positions > k_max_multiple_of_states) too_big(dfa.next.size());
  multiple_builder builder(b, m, fraction, std::move(dfa));
  std::vector<alternative> out;
  for (size_t i = 0; i < live.size(); ++i) builder.add(out, grammar_builder::literal(live[i].sign), bounds[i].first, bounds[i].second, plans[i]);
  return out;
}

}  // namespace spate::grammar::json_detail
