// UTF-8 and the Unicode behaviour of Python's str that the Jinja renderer reproduces:
// code point counting and indexing, str.isspace / str.isprintable, full case mappings
// (str.lower with the final-sigma rule, str.upper, str.title, str.capitalize),
// str.splitlines boundaries.
//
// Contract: every function taking text expects valid UTF-8 (the renderer sanitizes all text
// entering it with sanitize_utf8). Stateless and thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace spate::jinja::unicode {

// Decodes the code point at s[pos] and advances pos. Precondition: pos < s.size(), valid UTF-8.
char32_t decode(std::string_view s, std::size_t& pos);
void append_utf8(std::string& out, char32_t cp);

bool is_valid_utf8(std::string_view s);
// Replaces each maximal ill-formed subsequence by U+FFFD (Python's errors="replace").
std::string sanitize_utf8(std::string_view s);

bool is_ascii(std::string_view s);
std::size_t count_code_points(std::string_view s);
// Byte offset of code point index `index` (index <= count); s.size() for index == count.
std::size_t byte_offset(std::string_view s, std::size_t index);

bool is_space(char32_t cp);      // str.isspace()
bool is_printable(char32_t cp);  // str.isprintable()
bool is_linebreak(char32_t cp);  // str.splitlines() boundary (\r\n handled by the caller)
bool is_cased(char32_t cp);
bool is_case_ignorable(char32_t cp);
bool is_upper_char(char32_t cp);  // approximation: has a lower-case mapping, not title case
bool is_lower_char(char32_t cp);  // approximation: cased and not upper / title case

std::string lower(std::string_view s);       // str.lower()
std::string upper(std::string_view s);       // str.upper()
std::string title(std::string_view s);       // str.title()
std::string capitalize(std::string_view s);  // str.capitalize()
std::string swapcase(std::string_view s);    // str.swapcase()
bool islower(std::string_view s);            // str.islower()
bool isupper(std::string_view s);            // str.isupper()

}  // namespace spate::jinja::unicode
