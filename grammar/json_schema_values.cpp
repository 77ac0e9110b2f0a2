// JSON values for the JSON Schema compiler: pointers and errors, keyword
// counts, enum/const serialization, type membership (json_schema_internal.h).
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include "grammar/json_schema.h"
#include "grammar/json_schema_internal.h"

namespace spate::grammar::json_detail {
namespace {

// Compact canonical JSON: no whitespace, shortest round-trip doubles, strings
// escaped minimally (", \, control characters). depth bounds the recursion.
void write_json(const boost::json::value& v, std::string& out, int depth, const std::string& ptr) {
  if (depth > k_max_nesting) schema_fail(ptr, "value nested deeper than " + std::to_string(k_max_nesting));
  switch (v.kind()) {
    case boost::json::kind::null: out += "null"; return;
    case boost::json::kind::bool_: out += v.get_bool() ? "true" : "false"; return;
    case boost::json::kind::int64: out += std::to_string(v.get_int64()); return;
    case boost::json::kind::uint64: out += std::to_string(v.get_uint64()); return;
    case boost::json::kind::double_: {
      char buf[64];
      const auto res = std::to_chars(buf, buf + sizeof buf, v.get_double());
      out.append(buf, res.ptr);
      return;
    }
    case boost::json::kind::string: {
      out += '"';
      for (const char c : v.get_string()) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
          out += '\\', out += c;
        } else if (c == '\n') {
          out += "\\n";
        } else if (c == '\t') {
          out += "\\t";
        } else if (c == '\r') {
          out += "\\r";
        } else if (u < 0x20) {
          static constexpr char k_hex[] = "0123456789abcdef";
          out += "\\u00", out += k_hex[u >> 4], out += k_hex[u & 15];
        } else {
          out += c;
        }
      }
      out += '"';
      return;
    }
    case boost::json::kind::array: {
      out += '[';
      for (size_t i = 0; i < v.get_array().size(); ++i) {
        if (i > 0) out += ',';
        write_json(v.get_array()[i], out, depth + 1, ptr);
      }
      out += ']';
      return;
    }
    case boost::json::kind::object: {
      out += '{';
      bool first = true;
      for (const auto& kv : v.get_object()) {
        if (!first) out += ',';
        first = false;
        write_json(boost::json::value(kv.key()), out, depth + 1, ptr);
        out += ':';
        write_json(kv.value(), out, depth + 1, ptr);
      }
      out += '}';
      return;
    }
  }
}

// v[lo, hi) sorted, sharing their first d bytes: their common prefix beyond
// d, then a choice by the next byte (a radix tree).
alternative choice_from(grammar_builder& b, const std::vector<std::string>& v, size_t lo, size_t hi, size_t d) {
  size_t e = d;
  while (e < v[lo].size() && e < v[hi - 1].size() && v[lo][e] == v[hi - 1][e]) ++e;
  alternative out = grammar_builder::literal(std::string_view(v[lo]).substr(d, e - d));
  if (hi - lo == 1) return out;
  std::vector<alternative> alts;
  size_t i = lo;
  if (v[i].size() == e) {
    alts.emplace_back();
    ++i;
  }
  while (i < hi) {
    size_t j = i;
    while (j < hi && v[j][e] == v[i][e]) ++j;
    alts.push_back(choice_from(b, v, i, j, e));
    i = j;
  }
  return out + b.group(std::move(alts));
}

}  // namespace

std::string pointer_text(const std::string& ptr) { return ptr.empty() ? "(root)" : ptr; }

std::string pointer_child(const std::string& ptr, std::string_view key) {
  std::string out = ptr + "/";
  for (const char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

void schema_fail(const std::string& ptr, const std::string& what) { throw grammar_error(pointer_text(ptr) + ": " + what); }

int64_t count_keyword(const boost::json::object& s, std::string_view key, const std::string& ptr, int64_t max) {
  const boost::json::value& v = s.at(key);
  const std::string kp = pointer_child(ptr, key);
  int64_t n = -1;
  if (v.is_int64()) n = v.get_int64();
  if (v.is_uint64()) n = v.get_uint64() > static_cast<uint64_t>(max) ? max + 1 : static_cast<int64_t>(v.get_uint64());
  if (v.is_double() && v.get_double() >= 0 && v.get_double() == std::floor(v.get_double())) {
    n = v.get_double() > static_cast<double>(max) ? max + 1 : static_cast<int64_t>(v.get_double());
  }
  if (n < 0) schema_fail(kp, "must be a non-negative integer");
  if (n > max) schema_fail(kp, "above the limit of " + std::to_string(max));
  return n;
}

std::string json_literal(const boost::json::value& v, const std::string& ptr) {
  std::string out;
  write_json(v, out, 0, ptr);
  return out;
}

// The JSON Schema type names a value belongs to.
bool has_type(const boost::json::value& v, std::string_view t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_bool();
  if (t == "string") return v.is_string();
  if (t == "array") return v.is_array();
  if (t == "object") return v.is_object();
  if (t == "number") return v.is_number();
  if (t == "integer") return v.is_int64() || v.is_uint64() || (v.is_double() && v.get_double() == std::floor(v.get_double()));
  return false;
}

alternative literal_choice(grammar_builder& b, std::vector<std::string> texts) {
  std::sort(texts.begin(), texts.end());
  texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
  if (texts.empty()) throw grammar_error("literal_choice: no texts");
  return choice_from(b, texts, 0, texts.size(), 0);
}

}  // namespace spate::grammar::json_detail
