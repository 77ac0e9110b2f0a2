// JSON Schema "string": length bounds, formats and patterns (json_schema.h),
// plus the generic JSON rules every schema shares (json_rules).
#include <initializer_list>
#include <map>
#include <string>
#include <utility>

#include "grammar/json_schema.h"
#include "grammar/json_schema_internal.h"
#include "grammar/regex_compiler.h"


namespace spate::grammar::json_detail {
namespace {

// One byte out of the given inclusive ranges.
symbol byte_set(std::initializer_list<std::pair<char, char>> ranges) {
  symbol s;
  for (const auto& [lo, hi] : ranges) s.set |= bytes_symbol(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)).set;
  return s;
}

symbol one(char c) { return byte_set({{c, c}}); }

alternative times(const symbol& s, int n) { return alternative(static_cast<size_t>(n), s); }

int32_t find_rule(const grammar_builder& b, std::string_view name) {
  const auto& rules = b.peek().rules;
  for (size_t i = 0; i < rules.size(); ++i) {
    if (rules[i].name == name) return static_cast<int32_t>(i);
  }
  return -1;
}

// Formats, as the bytes between a string's quotes.
alternative date_format(grammar_builder& b) {
  const symbol d = byte_set({{'0', '9'}});
  const alternative month = b.group({{one('0'), byte_set({{'1', '9'}})}, {one('1'), byte_set({{'0', '2'}})}});
  const alternative day = b.group({{one('0'), byte_set({{'1', '9'}})}, {byte_set({{'1', '2'}}), d}, {one('3'), byte_set({{'0', '1'}})}});
  return times(d, 4) + one('-') + month + one('-') + day;
}

alternative time_format(grammar_builder& b) {
  const symbol d = byte_set({{'0', '9'}});
  const alternative hour = b.group({{byte_set({{'0', '1'}}), d}, {one('2'), byte_set({{'0', '3'}})}});
  const alternative minute = {byte_set({{'0', '5'}}), d};
  const alternative second = b.group({minute, grammar_builder::literal("60")});  // leap second (RFC 3339)
  const alternative fraction = b.group({alternative{one('.')} + b.repeat({d}, 1, 9), {}});
  const alternative offset = b.group({{byte_set({{'Z', 'Z'}, {'z', 'z'}})}, alternative{byte_set({{'+', '+'}, {'-', '-'}})} + hour + one(':') + minute});
  return hour + one(':') + minute + one(':') + second + fraction + offset;
}

alternative uuid_format() {
  const symbol h = byte_set({{'0', '9'}, {'a', 'f'}, {'A', 'F'}});
  return times(h, 8) + one('-') + times(h, 4) + one('-') + times(h, 4) + one('-') + times(h, 4) + one('-') + times(h, 12);
}

// local@domain.tld: dot-atoms of RFC 5322 "atext" (no quoted local parts), DNS
// labels (letters, digits, inner hyphens), a top-level domain of 2+ letters.
alternative email_format(grammar_builder& b) {
  const symbol atext = byte_set({{'A', 'Z'}, {'a', 'z'}, {'0', '9'}, {'!', '!'}, {'#', '\''}, {'*', '+'}, {'-', '-'},
                                 {'/', '/'}, {'=', '='}, {'?', '?'}, {'^', '`'}, {'{', '~'}});
  const alternative atom = {atext};
  // Bounded so a model cannot write an address forever, and within RFC 5321's
  // 64-character local part: a dot-atom of at most 32 characters, then at
  // most 2 more of at most 15; labels of at most 32, at most 4 plus the
  // top-level domain of 2 to 12 letters.
  const alternative local = atom + b.repeat(atom, 0, 31) + b.repeat(alternative{one('.')} + atom + b.repeat(atom, 0, 14), 0, 2);
  const symbol alnum = byte_set({{'A', 'Z'}, {'a', 'z'}, {'0', '9'}});
  const symbol alnum_hyphen = byte_set({{'A', 'Z'}, {'a', 'z'}, {'0', '9'}, {'-', '-'}});
  const alternative label = alternative{alnum} + b.group({b.repeat({alnum_hyphen}, 0, 30) + alnum, {}});
  const symbol letter = byte_set({{'A', 'Z'}, {'a', 'z'}});
  const alternative tld = alternative{letter, letter} + b.repeat({letter}, 0, 10);
  return local + one('@') + b.repeat(label + one('.'), 1, 4) + tld;
}

// RFC 3339 appendix A (the "duration" of JSON Schema), each number of 1 to
// k_max_duration_digits digits; no fractions, signs or other orders (ISO 8601
// allows more, the JSON Schema test suite does not):
//   "P" (date [time] | time | n "W"), date = n "Y" [n "M" [n "D"]] | n "M" [n "D"] | n "D",
//   time = "T" (n "H" [n "M" [n "S"]] | n "M" [n "S"] | n "S").
alternative duration_format(grammar_builder& b) {
  const alternative n = alternative{byte_set({{'0', '9'}})} + b.repeat({byte_set({{'0', '9'}})}, 0, k_max_duration_digits - 1);
  const auto opt = [&](const alternative& a) { return b.group({a, {}}); };
  const auto unit = [&](char c, const alternative& rest) { return alternative{one(c)} + rest; };
  // Shared tails: what may follow n "M" in a date (n "D") and in a time (n "S").
  const alternative day_after_month = opt(n + one('D'));
  const alternative second_after_minute = opt(n + one('S'));
  const alternative hour_tail = opt(n + one('M') + second_after_minute);
  const alternative time = alternative{one('T')} + n + b.group({unit('H', hour_tail), unit('M', second_after_minute), {one('S')}});
  const alternative opt_time = opt(time);
  const alternative year_tail = opt(n + one('M') + day_after_month);
  const alternative date_units = b.group({unit('Y', year_tail) + opt_time, unit('M', day_after_month) + opt_time, unit('D', opt_time), {one('W')}});
  return alternative{one('P')} + b.group({n + date_units, time});
}

// RFC 4648 base64 (url: the URL-safe alphabet, - and _ for + and /), padded
// with '=' to groups of 4, in canonical form (the bits a padded group does
// not use are 0), of lo to hi characters (hi < 0: no bound).
alternative base64_format(grammar_builder& b, bool url, int64_t lo, int64_t hi, const std::string& ptr) {
  const symbol c = url ? byte_set({{'A', 'Z'}, {'a', 'z'}, {'0', '9'}, {'-', '-'}, {'_', '_'}}) : byte_set({{'A', 'Z'}, {'a', 'z'}, {'0', '9'}, {'+', '+'}, {'/', '/'}});
  symbol by16, by4;  // characters whose alphabet index is a multiple of 16 / 4: the last of a padded group
  for (const char x : std::string_view("AQgw")) by16.set.set(static_cast<uint8_t>(x));
  for (const char x : std::string_view("AEIMQUYcgkosw048")) by4.set.set(static_cast<uint8_t>(x));
  const int64_t groups_lo = (lo + 3) / 4, groups_hi = hi < 0 ? -1 : hi / 4;
  if (groups_hi >= 0 && groups_lo > groups_hi) {
    schema_fail(ptr, "no base64 string has " + std::to_string(lo) + " to " + std::to_string(hi) + " characters (a multiple of 4)");
  }
  const alternative full = {c, c, c, c};
  const alternative padded = b.group({{c, by16, one('='), one('=')}, {c, c, by4, one('=')}});
  std::vector<alternative> alts{b.repeat(full, groups_lo, groups_hi)};
  if (groups_hi != 0) alts.push_back(b.repeat(full, std::max<int64_t>(groups_lo, 1) - 1, groups_hi < 0 ? -1 : groups_hi - 1) + padded);
  return b.group(std::move(alts));
}

bool is_base64(std::string_view name) { return name == "byte" || name == "base64" || name == "base64url"; }

alternative format_schema(grammar_builder& b, std::string_view name, const std::string& ptr) {
  if (name == "date") return date_format(b);
  if (name == "time") return time_format(b);
  if (name == "date-time") return date_format(b) + byte_set({{'T', 'T'}, {'t', 't'}}) + time_format(b);
  if (name == "duration") return duration_format(b);
  if (name == "uuid") return uuid_format();
  if (name == "email") return email_format(b);
  if (is_base64(name)) return base64_format(b, name == "base64url", 0, -1, ptr);
  schema_fail(ptr, "unsupported format '" + std::string(name) + "' (supported: date, time, date-time, duration, uuid, email, byte, base64, base64url, binary)");
}

// True when pattern has a '|' outside groups and classes.
bool top_level_bar(std::string_view p) {
  int depth = 0;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {
      ++i;
    } else if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;
      if (i + 1 < p.size() && p[i + 1] == ']') ++i;  // ']' first is literal
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    } else if (c == '|' && depth == 0) {
      return true;
    }
  }
  return false;
}

// JSON Schema patterns SEARCH (ECMA-262): unless anchored with ^ / $, any
// text may come before / after the match. The regex compiler full-matches,
// so unanchored sides get [\s\S]* (every code point).
alternative pattern_schema(grammar_builder& b, const boost::json::value& p, const std::string& ptr) {
  if (!p.is_string()) schema_fail(ptr, "must be a string");
  std::string_view body = p.get_string();
  const bool at_start = body.starts_with('^');
  if (at_start) body.remove_prefix(1);
  size_t backslashes = 0;
  while (body.size() > 1 + backslashes && body[body.size() - 2 - backslashes] == '\\') ++backslashes;
  const bool at_end = body.ends_with('$') && backslashes % 2 == 0;
  if (at_end) body.remove_suffix(1);
  if ((at_start || at_end) && top_level_bar(body)) {
    schema_fail(ptr, "an anchor with a top-level '|' is not supported; group the alternatives, e.g. ^(?:a|b)$");
  }
  try {
    grammar_builder scratch;  // errors with positions in the pattern as written
    add_regex(scratch, p.get_string(), regex_text::json_string);
  } catch (const grammar_error& e) {
    schema_fail(ptr, e.what());
  }
  const std::string any = "[\\s\\S]*";
  return add_regex(b, (at_start ? "" : any) + "(?:" + std::string(body) + ")" + (at_end ? "" : any), regex_text::json_string);
}

// The units of a canonical JSON string spelling: an escape (\x or \uXXXX)
// or one UTF-8 character each.
std::vector<std::string> spelling_units(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 1;
    if (c == '\\') {
      n = i + 1 < s.size() && s[i + 1] == 'u' ? 6 : 2;
    } else if (c >= 0xF0) {
      n = 4;
    } else if (c >= 0xE0) {
      n = 3;
    } else if (c >= 0xC0) {
      n = 2;
    }
    out.emplace_back(s.substr(i, n));
    i += n;
  }
  return out;
}

uint32_t decode_utf8(std::string_view u) {
  const auto lead = static_cast<unsigned char>(u[0]);
  if (u.size() == 1) return lead;
  uint32_t cp = lead & (0x7F >> u.size());
  for (size_t i = 1; i < u.size(); ++i) cp = (cp << 6) | (static_cast<unsigned char>(u[i]) & 0x3F);
  return cp;
}

// One string unit except the given ones (units of canonical spellings). A
// \uXXXX among them excludes every \u escape: narrower than needed, still valid.
alternative unit_except(grammar_builder& b, const json_rules& r, const std::vector<std::string>& units) {
  if (units.empty()) return {ref(r.string_char)};
  std::vector<cp_range> banned{{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
  std::string short_escapes = "\"\\/bfnrt";
  bool u_escapes = true;
  for (const std::string& u : units) {
    if (u[0] != '\\') {
      const uint32_t cp = decode_utf8(u);
      banned.push_back({cp, cp});
    } else if (u[1] == 'u') {
      u_escapes = false;
    } else {
      std::erase(short_escapes, u[1]);
    }
  }
  std::vector<alternative> alts;
  const std::vector<cp_range> allowed = complement(banned);
  if (!allowed.empty()) alts.push_back(b.code_points(allowed));
  if (!short_escapes.empty()) {
    symbol esc;
    for (const char c : short_escapes) esc.set.set(static_cast<uint8_t>(c));
    alts.push_back({one('\\'), esc});
  }
  if (u_escapes) alts.push_back(alternative{one('\\'), one('u')} + times(byte_set({{'0', '9'}, {'a', 'f'}, {'A', 'F'}}), 4));
  return b.group(std::move(alts));
}

}  // namespace

json_rules::json_rules(grammar_builder& b) {
  if ((value = find_rule(b, "%json-value")) >= 0) {
    ws = find_rule(b, "%json-ws"), string_char = find_rule(b, "%json-char"), string = find_rule(b, "%json-string");
    number = find_rule(b, "%json-number"), integer = find_rule(b, "%json-integer");
    object = find_rule(b, "%json-object"), array = find_rule(b, "%json-array");
    return;
  }
  const symbol digit = byte_set({{'0', '9'}});
  // ws ::= ( " " | "\n" [ \t]{0,k_max_json_indent} )?  -- bounded, so a generation cannot idle in it.
  // Compact (--json-whitespace compact, as vLLM's disable_any_whitespace): none at all.
  ws = b.json_compact() ? b.add_rule("%json-ws", {{}})
                        : b.add_rule("%json-ws", {{one(' ')}, alternative{one('\n')} + b.repeat({byte_set({{' ', ' '}, {'\t', '\t'}})}, 0, k_max_json_indent), {}});
  // One character: any code point from U+0020 except '"' and '\', or an escape.
  const alternative plain = b.code_points({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, k_max_code_point}});
  const symbol hex = byte_set({{'0', '9'}, {'a', 'f'}, {'A', 'F'}});
  string_char = b.add_rule("%json-char", {plain,
                                          {one('\\'), byte_set({{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 'b'}, {'f', 'f'}, {'n', 'n'}, {'r', 'r'}, {'t', 't'}})},
                                          alternative{one('\\'), one('u')} + times(hex, 4)});
  string = b.add_rule("%json-string", {alternative{one('"')} + b.repeat({ref(string_char)}, 0, -1) + one('"')});
  const alternative magnitude = b.group({{one('0')}, alternative{byte_set({{'1', '9'}})} + b.repeat({digit}, 0, k_max_integer_digits - 1)});
  integer = b.add_rule("%json-integer", {magnitude, alternative{one('-'), byte_set({{'1', '9'}})} + b.repeat({digit}, 0, k_max_integer_digits - 1)});
  const alternative fraction = b.group({alternative{one('.')} + b.repeat({digit}, 1, k_max_fraction_digits), {}});
  const alternative exponent = b.group({alternative{byte_set({{'e', 'e'}, {'E', 'E'}})} + b.group({{byte_set({{'+', '+'}, {'-', '-'}})}, {}}) + b.repeat({digit}, 1, 3), {}});
  number = b.add_rule("%json-number", {b.group({{one('-')}, {}}) + magnitude + fraction + exponent});
  value = b.declare_rule("%json-value");
  object = b.declare_rule("%json-object");
  array = b.declare_rule("%json-array");
  const alternative member = alternative{ref(string), ref(ws), one(':'), ref(ws), ref(value), ref(ws)};
  const int32_t member_rule = b.add_helper({member});
  b.set_alts(object, {alternative{one('{'), ref(ws)} + b.group({alternative{ref(member_rule)} + b.repeat({one(','), ref(ws), ref(member_rule)}, 0, -1), {}}) + one('}')});
  b.set_distinct(object);  // no key twice in one object (distinct_items.h)
  const int32_t element = b.add_helper({{ref(value), ref(ws)}});
  b.set_alts(array, {alternative{one('['), ref(ws)} + b.group({alternative{ref(element)} + b.repeat({one(','), ref(ws), ref(element)}, 0, -1), {}}) + one(']')});
  b.set_alts(value, {{ref(object)}, {ref(array)}, {ref(string)}, {ref(number)}, grammar_builder::literal("true"), grammar_builder::literal("false"),
                     grammar_builder::literal("null")});
}

alternative string_except(grammar_builder& b, const json_rules& r, const std::vector<std::string>& spellings) {
  // A trie over the spellings' units; node t's rule matches the rest of a
  // string that so far equals t's prefix of some spelling:
  //   node ::= "" (unless t ends a spelling) | unit child ... | other-unit any-units
  struct node {
    std::map<std::string, size_t> children;
    bool terminal = false;
  };
  std::vector<node> trie(1);
  for (const std::string& sp : spellings) {
    size_t t = 0;
    for (const std::string& u : spelling_units(sp)) {
      auto [it, added] = trie[t].children.emplace(u, trie.size());
      if (added) trie.emplace_back();
      t = it->second;
    }
    trie[t].terminal = true;
  }
  const alternative any_units = b.repeat({ref(r.string_char)}, 0, -1);
  std::vector<int32_t> rules(trie.size());
  for (size_t t = 0; t < trie.size(); ++t) rules[t] = b.declare_rule("." + std::to_string(b.n_rules()));
  for (size_t t = 0; t < trie.size(); ++t) {
    std::vector<alternative> alts;
    if (!trie[t].terminal) alts.emplace_back();
    std::vector<std::string> units;
    for (const auto& [u, child] : trie[t].children) {
      alts.push_back(grammar_builder::literal(u) + ref(rules[child]));
      units.push_back(u);
    }
    alts.push_back(unit_except(b, r, units) + any_units);
    b.set_alts(rules[t], std::move(alts));
  }
  return {ref(rules[0])};
}

alternative string_schema(grammar_builder& b, const json_rules& r, const boost::json::object& s, const std::string& ptr) {
  const auto* format = s.if_contains("format");
  const std::string fp = pointer_child(ptr, "format");
  if (format != nullptr && !format->is_string()) schema_fail(fp, "must be a string");
  // "binary" (OpenAPI: any octets; pydantic's bytes, written as UTF-8 text
  // by default) is any string, so the other keywords apply as without it.
  if (format != nullptr && format->get_string() == "binary") format = nullptr;
  const std::string_view name = format != nullptr ? std::string_view(format->get_string()) : "";
  const auto* pattern = s.if_contains("pattern");
  const bool lengths = s.contains("minLength") || s.contains("maxLength");
  if (format != nullptr && is_base64(name) && pattern != nullptr) schema_fail(fp, "format '" + std::string(name) + "' combined with pattern is not supported");
  if (format != nullptr && !is_base64(name) && (pattern != nullptr || lengths)) {
    schema_fail(fp, "format combined with pattern, minLength or maxLength is not supported");
  }
  if (pattern != nullptr && lengths) schema_fail(pointer_child(ptr, "pattern"), "pattern combined with minLength or maxLength is not supported");
  const alternative quote = {one('"')};
  if (pattern != nullptr) return quote + pattern_schema(b, *pattern, pointer_child(ptr, "pattern")) + quote;
  if (format != nullptr && !lengths) return quote + format_schema(b, name, fp) + quote;
  if (format == nullptr && !lengths) return {ref(r.string)};
  const int64_t lo = s.contains("minLength") ? count_keyword(s, "minLength", ptr, k_max_repeat) : 0;
  const int64_t hi = s.contains("maxLength") ? count_keyword(s, "maxLength", ptr, k_max_repeat) : -1;
  if (hi >= 0 && lo > hi) schema_fail(pointer_child(ptr, "minLength"), "minLength is greater than maxLength");
  if (format != nullptr) return quote + base64_format(b, name == "base64url", lo, hi, fp) + quote;  // base64: one character per byte
  return quote + b.repeat({ref(r.string_char)}, lo, hi) + quote;
}

}  // namespace spate::grammar::json_detail
