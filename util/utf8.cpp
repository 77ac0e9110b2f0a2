#include "util/utf8.h"

#include <cstdint>

namespace spate {

// ---------------------------------------------------------------------------------------------
// UTF-8
// ---------------------------------------------------------------------------------------------
namespace utf8 {
namespace {

// Length of the well-formed sequence starting at s[0] (1..4), or 0 when ill-formed; `need` gets
// the number of bytes the lead byte announces and `have` the number of leading bytes that are a
// well-formed prefix (>= 1 even for a bad lead byte, so that the caller always advances).
size_t scan(const unsigned char* s, size_t n, size_t& have) {
  const unsigned char b = s[0];
  have = 1;
  if (b < 0x80) return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // range allowed for the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    len = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3;
    if (b == 0xE0) lo = 0xA0;  // no overlongs
    if (b == 0xED) hi = 0x9F;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4;
    if (b == 0xF0) lo = 0x90;  // no overlongs
    if (b == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    return 0;  // continuation byte, C0/C1, F5..FF
  }
  for (size_t i = 1; i < len; ++i) {
    if (i >= n) return 0;
    const unsigned char c = s[i];
    const unsigned char l = (i == 1) ? lo : 0x80, h = (i == 1) ? hi : 0xBF;
    if (c < l || c > h) return 0;
    have = i + 1;
  }
  return len;
}

}  // namespace

bool is_valid(std::string_view sv) {
  const auto* s = reinterpret_cast<const unsigned char*>(sv.data());
  size_t i = 0, n = sv.size();
  while (i < n) {
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    size_t have;
    size_t len = scan(s + i, n - i, have);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string sanitize(std::string_view sv) {
  std::string out;
  out.reserve(sv.size() + 8);
  const auto* s = reinterpret_cast<const unsigned char*>(sv.data());
  size_t i = 0, n = sv.size();
  while (i < n) {
    size_t have;
    size_t len = scan(s + i, n - i, have);
    if (len) {
      out.append(sv.data() + i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      i += have;  // the maximal well-formed prefix is replaced as a whole
    }
  }
  return out;
}

size_t complete_prefix_len(std::string_view sv) {
  const auto* s = reinterpret_cast<const unsigned char*>(sv.data());
  const size_t n = sv.size();
  // Walk back over at most 3 continuation bytes to the last lead byte.
  size_t pos = n, k = 0;
  while (k < 3 && pos > 0 && (s[pos - 1] & 0xC0) == 0x80) {
    --pos;
    ++k;
  }
  if (pos == 0) return n;
  const size_t start = pos - 1, avail = n - start;
  const unsigned char lead = s[start];
  const size_t announced = (lead >= 0xF0 && lead <= 0xF4) ? 4 : (lead >= 0xE0 && lead <= 0xEF) ? 3
                         : (lead >= 0xC2 && lead <= 0xDF) ? 2 : 1;
  if (announced <= avail) return n;  // complete (well-formed or not)
  size_t have;
  scan(s + start, avail, have);
  return have == avail ? start : n;  // hold back only a well-formed prefix of a character
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace utf8

}  // namespace spate
