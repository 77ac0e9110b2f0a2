// Helpers shared by the two formatting front ends: jinja_format.cpp (str.format and
// format(value, spec)) and jinja_percent_format.cpp (printf-style `str % args`). Internal to
// jinja/; errors are runtime_error with Python's message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "jinja/jinja_value.h"

namespace spate::jinja::format_detail {

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Reads the decimal digits of s from p (advancing p past them); 0 if there are none.
// Throws "Too many decimal digits in format string" past 100,000,000.
std::int64_t parse_int(std::string_view s, std::size_t& p);

// v in base 2..16, lower- or upper-case digits, no prefix; "0" for 0.
std::string to_base(std::uint64_t v, int base, bool upper);

// |x| formatted per type (0: repr-like, or one of e E f F g G), without sign. add_dot0 is
// always set to false. Throws for any other type.
std::string format_float_body(double x, char type, std::int64_t precision, bool alt, bool& add_dot0);

// The index of the `close` that balances the `open` just before fmt[from]
// (nested pairs count), or npos when fmt ends first.
std::size_t find_closing(std::string_view fmt, std::size_t from, char open, char close);

// Python's ascii(v): repr(v) with non-ASCII code points as \xNN, \uNNNN or \UNNNNNNNN.
std::string ascii_repr(const value& v, render_context& ctx);

}  // namespace spate::jinja::format_detail
