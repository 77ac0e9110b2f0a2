#include "jinja/jinja_pystr.h"

#include <algorithm>

#include "jinja/jinja_error.h"
#include "jinja/jinja_unicode.h"

namespace spate::jinja::pystr {
namespace {

std::u32string to_u32(std::string_view s) {
  std::u32string r;
  r.reserve(s.size());
  std::size_t pos = 0;
  while (pos < s.size()) r.push_back(unicode::decode(s, pos));
  return r;
}

std::string to_utf8(std::u32string_view u) {
  std::string r;
  r.reserve(u.size());
  for (char32_t c : u) unicode::append_utf8(r, c);
  return r;
}

bool in_set(const std::u32string& set, char32_t c) { return set.find(c) != std::u32string::npos; }

}  // namespace

std::string strip(std::string_view s, const std::string* chars, bool left, bool right) {
  const std::u32string u = to_u32(s);
  const std::u32string set = chars ? to_u32(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) { return chars ? in_set(set, c) : unicode::is_space(c); };
  std::size_t lo = 0, hi = u.size();
  if (left)
    while (lo < hi && strip_it(u[lo])) ++lo;
  if (right)
    while (hi > lo && strip_it(u[hi - 1])) --hi;
  return to_utf8(std::u32string_view(u).substr(lo, hi - lo));
}

std::vector<std::string> split(std::string_view s, const std::string* sep, std::int64_t maxsplit) {
  std::vector<std::string> out;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    if (sep->empty()) throw runtime_error("empty separator");
    std::size_t pos = 0;
    while (maxsplit-- > 0) {
      const std::size_t f = s.find(*sep, pos);
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, f - pos));
      pos = f + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  const std::u32string u = to_u32(s);
  const std::size_t n = u.size();
  std::size_t i = 0;
  while (maxsplit-- > 0) {
    while (i < n && unicode::is_space(u[i])) ++i;
    if (i == n) break;
    const std::size_t j = i++;
    while (i < n && !unicode::is_space(u[i])) ++i;
    out.push_back(to_utf8(std::u32string_view(u).substr(j, i - j)));
  }
  if (i < n) {
    while (i < n && unicode::is_space(u[i])) ++i;
    if (i != n) out.push_back(to_utf8(std::u32string_view(u).substr(i)));
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::string* sep, std::int64_t maxsplit) {
  std::vector<std::string> out;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    if (sep->empty()) throw runtime_error("empty separator");
    std::size_t end = s.size();
    while (maxsplit-- > 0 && end >= sep->size()) {
      const std::size_t f = s.rfind(*sep, end - sep->size());
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(f + sep->size(), end - f - sep->size()));
      end = f;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  const std::u32string u = to_u32(s);
  std::ptrdiff_t i = static_cast<std::ptrdiff_t>(u.size()) - 1;
  while (maxsplit-- > 0) {
    while (i >= 0 && unicode::is_space(u[static_cast<std::size_t>(i)])) --i;
    if (i < 0) break;
    const std::ptrdiff_t j = i--;
    while (i >= 0 && !unicode::is_space(u[static_cast<std::size_t>(i)])) --i;
    out.push_back(
        to_utf8(std::u32string_view(u).substr(static_cast<std::size_t>(i + 1), static_cast<std::size_t>(j - i))));
  }
  if (i >= 0) {
    while (i >= 0 && unicode::is_space(u[static_cast<std::size_t>(i)])) --i;
    if (i >= 0) out.push_back(to_utf8(std::u32string_view(u).substr(0, static_cast<std::size_t>(i + 1))));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  const std::u32string u = to_u32(s);
  const std::size_t n = u.size();
  std::size_t i = 0;
  while (i < n) {
    const std::size_t j = i;
    while (i < n && !unicode::is_linebreak(u[i])) ++i;
    std::size_t eol = i;
    if (i < n) {
      if (u[i] == U'\r' && i + 1 < n && u[i + 1] == U'\n')
        i += 2;
      else
        ++i;
      if (keepends) eol = i;
    }
    out.push_back(to_utf8(std::u32string_view(u).substr(j, eol - j)));
  }
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view repl, std::int64_t count) {
  if (count < 0) count = INT64_MAX;
  std::string out;
  if (old.empty()) {
    std::size_t pos = 0;
    while (count > 0) {
      out.append(repl);
      --count;
      if (pos >= s.size()) break;
      const std::size_t start = pos;
      unicode::decode(s, pos);
      out.append(s.substr(start, pos - start));
    }
    out.append(s.substr(std::min(pos, s.size())));
    return out;
  }
  std::size_t pos = 0;
  while (count-- > 0) {
    const std::size_t f = s.find(old, pos);
    if (f == std::string_view::npos) break;
    out.append(s.substr(pos, f - pos));
    out.append(repl);
    pos = f + old.size();
  }
  out.append(s.substr(pos));
  return out;
}

void adjust_bounds(std::int64_t n, std::optional<std::int64_t> start, std::optional<std::int64_t> end, std::int64_t& lo,
                   std::int64_t& hi) {
  hi = end.value_or(n);
  if (hi > n)
    hi = n;
  else if (hi < 0) {
    hi += n;
    if (hi < 0) hi = 0;
  }
  lo = start.value_or(0);
  if (lo < 0) {
    lo += n;
    if (lo < 0) lo = 0;
  }
}

std::int64_t find(std::string_view s, std::string_view sub, std::optional<std::int64_t> start,
                  std::optional<std::int64_t> end, bool reverse) {
  const std::u32string u = to_u32(s);
  const std::u32string v = to_u32(sub);
  std::int64_t lo, hi;
  adjust_bounds(static_cast<std::int64_t>(u.size()), start, end, lo, hi);
  const auto m = static_cast<std::int64_t>(v.size());
  if (hi - lo < m) return -1;
  const std::u32string_view hay =
      std::u32string_view(u).substr(static_cast<std::size_t>(lo), static_cast<std::size_t>(hi - lo));
  const std::size_t f = reverse ? hay.rfind(v) : hay.find(v);
  return f == std::u32string_view::npos ? -1 : lo + static_cast<std::int64_t>(f);
}

std::int64_t count(std::string_view s, std::string_view sub, std::optional<std::int64_t> start,
                   std::optional<std::int64_t> end) {
  const std::u32string u = to_u32(s);
  const std::u32string v = to_u32(sub);
  std::int64_t lo, hi;
  adjust_bounds(static_cast<std::int64_t>(u.size()), start, end, lo, hi);
  if (hi - lo < static_cast<std::int64_t>(v.size())) return 0;
  if (v.empty()) return hi - lo + 1;
  const std::u32string_view hay =
      std::u32string_view(u).substr(static_cast<std::size_t>(lo), static_cast<std::size_t>(hi - lo));
  std::int64_t n = 0;
  std::size_t pos = 0;
  while ((pos = hay.find(v, pos)) != std::u32string_view::npos) {
    ++n;
    pos += v.size();
  }
  return n;
}

bool starts_with(std::string_view s, std::string_view prefix, std::optional<std::int64_t> start,
                 std::optional<std::int64_t> end, bool at_end) {
  if (!start && !end)
    return at_end ? s.size() >= prefix.size() && s.substr(s.size() - prefix.size()) == prefix
                  : s.substr(0, prefix.size()) == prefix;
  const std::u32string u = to_u32(s);
  const std::u32string v = to_u32(prefix);
  std::int64_t lo, hi;
  adjust_bounds(static_cast<std::int64_t>(u.size()), start, end, lo, hi);
  const auto m = static_cast<std::int64_t>(v.size());
  if (hi - lo < m) return false;
  const std::int64_t at = at_end ? hi - m : lo;
  return std::u32string_view(u).substr(static_cast<std::size_t>(at), v.size()) == v;
}

void slice_indices(std::int64_t n, std::optional<std::int64_t> start, std::optional<std::int64_t> stop,
                   std::int64_t step, std::int64_t& lo, std::int64_t& hi) {
  const std::int64_t lower = step < 0 ? -1 : 0;
  const std::int64_t upper = step < 0 ? n - 1 : n;
  auto fix = [&](std::optional<std::int64_t> v, std::int64_t dflt) {
    if (!v) return dflt;
    std::int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < lower) x = lower;
    } else if (x > upper) {
      x = upper;
    }
    return x;
  };
  lo = fix(start, step < 0 ? upper : lower);
  hi = fix(stop, step < 0 ? lower : upper);
}

std::int64_t slice_length(std::int64_t lo, std::int64_t hi, std::int64_t step) {
  if (step > 0) return lo < hi ? (hi - lo - 1) / step + 1 : 0;
  return lo > hi ? (lo - hi - 1) / (-step) + 1 : 0;
}

std::string slice(std::string_view s, bool ascii, std::int64_t start, std::int64_t stop, std::int64_t step) {
  const std::int64_t n = slice_length(start, stop, step);
  if (n <= 0) return {};
  if (ascii) {
    if (step == 1) return std::string(s.substr(static_cast<std::size_t>(start), static_cast<std::size_t>(n)));
    std::string out;
    out.reserve(static_cast<std::size_t>(n));
    for (std::int64_t k = 0, i = start; k < n; ++k, i += step) out.push_back(s[static_cast<std::size_t>(i)]);
    return out;
  }
  const std::u32string u = to_u32(s);
  std::u32string r;
  r.reserve(static_cast<std::size_t>(n));
  for (std::int64_t k = 0, i = start; k < n; ++k, i += step) r.push_back(u[static_cast<std::size_t>(i)]);
  return to_utf8(r);
}

std::string at(std::string_view s, bool ascii, std::int64_t i) {
  if (ascii) return std::string(1, s[static_cast<std::size_t>(i)]);
  std::size_t pos = unicode::byte_offset(s, static_cast<std::size_t>(i));
  const std::size_t start = pos;
  unicode::decode(s, pos);
  return std::string(s.substr(start, pos - start));
}

std::string pad(std::string_view s, std::int64_t width, std::string_view fill, int align) {
  const auto len = static_cast<std::int64_t>(unicode::count_code_points(s));
  if (width <= len) return std::string(s);
  const std::int64_t marg = width - len;
  std::int64_t left = 0;
  if (align == 1)
    left = marg;
  else if (align == 0)
    left = marg / 2 + (marg & width & 1);
  const std::int64_t right = marg - left;
  std::string out;
  for (std::int64_t i = 0; i < left; ++i) out.append(fill);
  out.append(s);
  for (std::int64_t i = 0; i < right; ++i) out.append(fill);
  return out;
}

std::string zfill(std::string_view s, std::int64_t width) {
  const auto len = static_cast<std::int64_t>(unicode::count_code_points(s));
  if (width <= len) return std::string(s);
  const std::size_t fill = static_cast<std::size_t>(width - len);
  std::string out;
  std::string_view rest = s;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    out.push_back(s[0]);
    rest.remove_prefix(1);
  }
  out.append(fill, '0');
  out.append(rest);
  return out;
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

}  // namespace spate::jinja::pystr
