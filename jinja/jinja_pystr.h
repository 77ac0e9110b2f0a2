// Python str algorithms on UTF-8 text, indexed by code point like Python: strip, split,
// rsplit, splitlines, replace, find/rfind/count, startswith/endswith, slicing, padding,
// and markupsafe's HTML escape. Inputs must be valid UTF-8. Stateless, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spate::jinja::pystr {

// str.strip / lstrip / rstrip; chars == nullptr strips Unicode whitespace.
std::string strip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split / str.rsplit; sep == nullptr splits on whitespace runs. Throws
// runtime_error("empty separator") for an empty sep.
std::vector<std::string> split(std::string_view s, const std::string* sep, std::int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::string* sep, std::int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
// str.replace (count < 0: all).
std::string replace(std::string_view s, std::string_view old, std::string_view repl, std::int64_t count);

// Normalizes Python slice-style bounds [start, end) over a string of n code points.
void adjust_bounds(std::int64_t n, std::optional<std::int64_t> start, std::optional<std::int64_t> end, std::int64_t& lo,
                   std::int64_t& hi);
// str.find / str.rfind in code points (-1 when absent).
std::int64_t find(std::string_view s, std::string_view sub, std::optional<std::int64_t> start,
                  std::optional<std::int64_t> end, bool reverse);
std::int64_t count(std::string_view s, std::string_view sub, std::optional<std::int64_t> start,
                   std::optional<std::int64_t> end);
bool starts_with(std::string_view s, std::string_view prefix, std::optional<std::int64_t> start,
                 std::optional<std::int64_t> end, bool at_end);

// Code points [lo, lo+step, ...) as Python's s[start:stop:step] (bounds already resolved).
std::string slice(std::string_view s, bool ascii, std::int64_t start, std::int64_t stop, std::int64_t step);
// Code point at index i (0 <= i < length).
std::string at(std::string_view s, bool ascii, std::int64_t i);
// Resolves optional slice bounds for a sequence of length n (Python's slice.indices).
void slice_indices(std::int64_t n, std::optional<std::int64_t> start, std::optional<std::int64_t> stop,
                   std::int64_t step, std::int64_t& lo, std::int64_t& hi);
std::int64_t slice_length(std::int64_t lo, std::int64_t hi, std::int64_t step);

std::string pad(std::string_view s, std::int64_t width, std::string_view fill,
                int align);  // -1 left, 0 center, 1 right
std::string zfill(std::string_view s, std::int64_t width);

// markupsafe.escape: & < > ' " to entities.
std::string html_escape(std::string_view s);

}  // namespace spate::jinja::pystr
