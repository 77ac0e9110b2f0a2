#include "jinja/jinja_unicode.h"

#include <algorithm>

#include "jinja/jinja_unicode_data.h"
#include "util/utf8.h"

namespace spate::jinja::unicode {
namespace {

namespace ud = unicode_data;

bool in_ranges(const ud::cp_range* r, std::size_t n, char32_t cp) {
  const ud::cp_range* end = r + n;
  const ud::cp_range* it = std::upper_bound(r, end, cp, [](char32_t c, const ud::cp_range& x) { return c < x.lo; });
  if (it == r) return false;
  --it;
  return cp <= it->hi;
}

// Appends the mapping of cp from (runs, multi); returns false when cp maps to itself.
bool map_cp(std::string& out, char32_t cp, const ud::case_run* runs, std::size_t nruns, const ud::case_multi* multi,
            std::size_t nmulti) {
  const ud::case_multi* mend = multi + nmulti;
  const ud::case_multi* m =
      std::lower_bound(multi, mend, cp, [](const ud::case_multi& x, char32_t c) { return x.cp < c; });
  if (m != mend && m->cp == cp) {
    for (char32_t c : m->out) {
      if (c == 0) break;
      append_utf8(out, c);
    }
    return true;
  }
  const ud::case_run* rend = runs + nruns;
  const ud::case_run* it = std::upper_bound(runs, rend, cp, [](char32_t c, const ud::case_run& x) { return c < x.lo; });
  if (it != runs) {
    --it;
    if (cp <= it->hi && (cp - it->lo) % it->stride == 0) {
      append_utf8(out, static_cast<char32_t>(static_cast<std::int32_t>(cp) + it->delta));
      return true;
    }
  }
  return false;
}

void append_lower(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    return;
  }
  if (!map_cp(out, cp, ud::k_lower_runs, ud::k_lower_runs_size, ud::k_lower_multi, ud::k_lower_multi_size))
    append_utf8(out, cp);
}

void append_upper(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp >= 'a' && cp <= 'z' ? cp - 32 : cp));
    return;
  }
  if (!map_cp(out, cp, ud::k_upper_runs, ud::k_upper_runs_size, ud::k_upper_multi, ud::k_upper_multi_size))
    append_utf8(out, cp);
}

void append_title(std::string& out, char32_t cp) {
  if (cp >= 0x80 && map_cp(out, cp, ud::k_title_runs, ud::k_title_runs_size, ud::k_title_multi, ud::k_title_multi_size))
    return;
  append_upper(out, cp);
}

std::u32string to_u32(std::string_view s) {
  std::u32string r;
  r.reserve(s.size());
  std::size_t pos = 0;
  while (pos < s.size()) r.push_back(decode(s, pos));
  return r;
}

// Python's handle_capital_sigma: U+03A3 at index i lower-cases to final sigma when preceded
// by a cased letter and not followed by one (skipping case-ignorable code points).
char32_t lower_sigma(const std::u32string& u, std::size_t i) {
  std::ptrdiff_t j = static_cast<std::ptrdiff_t>(i) - 1;
  char32_t c = 0;
  for (; j >= 0; --j) {
    c = u[static_cast<std::size_t>(j)];
    if (!is_case_ignorable(c)) break;
  }
  bool final_sigma = j >= 0 && is_cased(c);
  if (final_sigma && i + 1 < u.size()) {
    std::size_t k = i + 1;
    for (; k < u.size(); ++k) {
      c = u[k];
      if (!is_case_ignorable(c)) break;
    }
    final_sigma = k == u.size() || !is_cased(c);
  }
  return final_sigma ? 0x3C2 : 0x3C3;
}

void append_lower_at(std::string& out, const std::u32string& u, std::size_t i) {
  if (u[i] == 0x3A3)
    append_utf8(out, lower_sigma(u, i));
  else
    append_lower(out, u[i]);
}

}  // namespace

char32_t decode(std::string_view s, std::size_t& pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) {
    ++pos;
    return b0;
  }
  int n = b0 >= 0xF0 ? 3 : b0 >= 0xE0 ? 2 : 1;
  char32_t cp = b0 & (0x3F >> n);
  ++pos;
  for (int i = 0; i < n && pos < s.size(); ++i, ++pos) cp = (cp << 6) | (static_cast<unsigned char>(s[pos]) & 0x3F);
  return cp;
}

void append_utf8(std::string& out, char32_t cp) { ::spate::utf8::append(out, static_cast<uint32_t>(cp)); }

// util/utf8's routines define the project's one convention
bool is_valid_utf8(std::string_view s) { return ::spate::utf8::is_valid(s); }

std::string sanitize_utf8(std::string_view s) { return ::spate::utf8::sanitize(s); }

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

std::size_t count_code_points(std::string_view s) {
  std::size_t n = 0;
  for (char c : s)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  return n;
}

std::size_t byte_offset(std::string_view s, std::size_t index) {
  std::size_t pos = 0;
  while (index > 0 && pos < s.size()) {
    ++pos;
    while (pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) ++pos;
    --index;
  }
  return pos;
}

bool is_space(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return true;
    default: return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool is_printable(char32_t cp) {
  if (cp < 0x80) return cp >= 0x20 && cp != 0x7F;
  return !in_ranges(ud::k_nonprintable, ud::k_nonprintable_size, cp);
}

bool is_linebreak(char32_t cp) {
  switch (cp) {
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x85:
    case 0x2028:
    case 0x2029: return true;
    default: return false;
  }
}

bool is_cased(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  return in_ranges(ud::k_cased, ud::k_cased_size, cp);
}

bool is_case_ignorable(char32_t cp) { return in_ranges(ud::k_case_ignorable, ud::k_case_ignorable_size, cp); }

bool is_upper_char(char32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z';
  std::string lo, up;
  append_lower(lo, cp);
  append_upper(up, cp);
  std::string self;
  append_utf8(self, cp);
  return lo != self && up == self;
}

bool is_lower_char(char32_t cp) {
  if (cp < 0x80) return cp >= 'a' && cp <= 'z';
  if (!is_cased(cp)) return false;
  std::string lo, self;
  append_lower(lo, cp);
  append_utf8(self, cp);
  return lo == self;
}

std::string lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (is_ascii(s)) {
    for (char c : s) out.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c);
    return out;
  }
  const std::u32string u = to_u32(s);
  for (std::size_t i = 0; i < u.size(); ++i) append_lower_at(out, u, i);
  return out;
}

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t pos = 0;
  while (pos < s.size()) append_upper(out, decode(s, pos));
  return out;
}

std::string title(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const std::u32string u = to_u32(s);
  bool prev_cased = false;
  for (std::size_t i = 0; i < u.size(); ++i) {
    if (prev_cased)
      append_lower_at(out, u, i);
    else
      append_title(out, u[i]);
    prev_cased = is_cased(u[i]);
  }
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const std::u32string u = to_u32(s);
  for (std::size_t i = 0; i < u.size(); ++i) {
    if (i == 0)
      append_title(out, u[i]);
    else
      append_lower_at(out, u, i);
  }
  return out;
}

std::string swapcase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const std::u32string u = to_u32(s);
  for (std::size_t i = 0; i < u.size(); ++i) {
    if (is_upper_char(u[i]))
      append_lower_at(out, u, i);
    else if (is_lower_char(u[i]))
      append_upper(out, u[i]);
    else
      append_utf8(out, u[i]);
  }
  return out;
}

bool islower(std::string_view s) {
  bool cased = false;
  std::size_t pos = 0;
  while (pos < s.size()) {
    const char32_t c = decode(s, pos);
    if (is_upper_char(c)) return false;
    if (is_cased(c) && !is_lower_char(c)) return false;  // title case
    if (is_lower_char(c)) cased = true;
  }
  return cased;
}

bool isupper(std::string_view s) {
  bool cased = false;
  std::size_t pos = 0;
  while (pos < s.size()) {
    const char32_t c = decode(s, pos);
    if (is_lower_char(c)) return false;
    if (is_upper_char(c))
      cased = true;
    else if (is_cased(c))
      return false;  // title case
  }
  return cased;
}

}  // namespace spate::jinja::unicode
