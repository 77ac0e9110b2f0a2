// UTF-8 validation and repair, shared by the tokenizer, the Jinja engine and the
// protocol layer. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace spate {

namespace utf8 {
// True when s is well-formed UTF-8 (no overlongs, surrogates, or code points above U+10FFFF).
bool is_valid(std::string_view s);
// s with every maximal ill-formed subsequence replaced by U+FFFD (Python errors="replace").
std::string sanitize(std::string_view s);
// Length of the longest prefix of s that ends on a character boundary such that the rest is an
// incomplete (but so far well-formed) sequence; == s.size() when s does not end mid-character.
size_t complete_prefix_len(std::string_view s);
// Appends the UTF-8 encoding of cp (1 to 4 bytes). Precondition: cp <= U+10FFFF
// (surrogates are encoded as given; callers that need scalar values check first).
void append(std::string& out, uint32_t cp);
}  // namespace utf8

}  // namespace spate
