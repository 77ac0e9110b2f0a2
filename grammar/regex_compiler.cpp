#include "grammar/regex_compiler.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "util/utf8.h"

namespace spate::grammar {
namespace {

// One node of a parsed pattern; children are indices into the node list.
struct re_node {
  enum class kind : uint8_t { chars, seq, alt, repeat };
  kind type = kind::seq;
  size_t pos = 0;                // byte offset in the pattern, for errors
  std::vector<cp_range> ranges;  // chars: one code point out of these (sorted, merged)
  std::vector<int32_t> kids;     // seq: in order (none: the empty string); alt: choices; repeat: the atom
  int64_t lo = 0, hi = -1;       // repeat: bounds, hi < 0 unbounded
  bool nullable = false;         // matches the empty string
};

// What an escape or a class character stands for: a set of code points;
// `single` when it is exactly one (usable as a range endpoint).
struct char_item {
  std::vector<cp_range> ranges;
  bool single = false;
};

char_item one_cp(uint32_t cp) { return {{{cp, cp}}, true}; }

const std::vector<cp_range> k_digit = {{'0', '9'}};
const std::vector<cp_range> k_word = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const std::vector<cp_range> k_space = {{'\t', '\r'}, {' ', ' '}};  // \t \n \v \f \r and space

// rs sorted by lo with overlapping and adjacent ranges merged.
std::vector<cp_range> normalized(std::vector<cp_range> rs) { return complement(complement(std::move(rs))); }

// True when rs holds a code point that UTF-8 can encode (not only surrogates).
bool has_scalar(const std::vector<cp_range>& rs) {
  return std::any_of(rs.begin(), rs.end(), [](const cp_range& r) { return r.lo < 0xD800 || r.hi > 0xDFFF; });
}

bool contains(const std::vector<cp_range>& rs, uint32_t cp) {
  return std::any_of(rs.begin(), rs.end(), [cp](const cp_range& r) { return r.lo <= cp && cp <= r.hi; });
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_octal(char c) { return c >= '0' && c <= '7'; }
bool is_ascii_alnum(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Parses a pattern (regex_compiler.h's dialect) into a tree of re_nodes,
// rejecting what the dialect does not support. Single use.
class regex_parser {
 public:
  explicit regex_parser(std::string_view src) : src_(src) {}

  // The root node of the whole pattern; the tree is in nodes().
  int32_t parse() {
    if (src_.size() > k_max_regex_bytes) {
      fail_at(0, "the pattern is longer than " + std::to_string(k_max_regex_bytes) + " bytes");
    }
    eat('^');  // a leading anchor is implied by full matching
    const int32_t root = parse_alternation();
    if (!at_end()) fail("unbalanced parenthesis");
    return root;
  }
  const std::vector<re_node>& nodes() const { return nodes_; }

 private:
  [[noreturn]] void fail_at(size_t pos, const std::string& what) const {
    throw grammar_error("regex position " + std::to_string(pos) + ": " + what);
  }
  [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }

  bool at_end() const { return pos_ >= src_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0'; }
  bool eat(char c) {
    if (at_end() || peek() != c) return false;
    ++pos_;
    return true;
  }

  int32_t add(re_node n) {
    nodes_.push_back(std::move(n));
    return static_cast<int32_t>(nodes_.size() - 1);
  }

  // A chars node; ranges must hold a code point UTF-8 can encode.
  int32_t add_chars(size_t pos, std::vector<cp_range> ranges) {
    if (!has_scalar(ranges)) fail_at(pos, "a surrogate code point cannot occur in UTF-8 text");
    re_node n;
    n.type = re_node::kind::chars;
    n.pos = pos;
    n.ranges = normalized(std::move(ranges));
    return add(std::move(n));
  }

  // A seq or alt node of kids; a single kid stands for itself.
  int32_t add_list(re_node::kind type, size_t pos, std::vector<int32_t> kids) {
    if (kids.size() == 1) return kids[0];
    const auto nullable = [this](int32_t k) { return nodes_[static_cast<size_t>(k)].nullable; };
    re_node n;
    n.type = type;
    n.pos = pos;
    n.nullable = type == re_node::kind::seq ? std::all_of(kids.begin(), kids.end(), nullable)
                                            : std::any_of(kids.begin(), kids.end(), nullable);
    n.kids = std::move(kids);
    return add(std::move(n));
  }

  // Alternatives separated by '|', up to ')' or the end.
  int32_t parse_alternation() {
    const size_t start = pos_;
    std::vector<int32_t> alts{parse_sequence()};
    while (eat('|')) alts.push_back(parse_sequence());
    return add_list(re_node::kind::alt, start, std::move(alts));
  }

  // Quantified atoms up to '|', ')' or the end (a final top-level '$' is skipped).
  int32_t parse_sequence() {
    const size_t start = pos_;
    std::vector<int32_t> items;
    for (;;) {
      skip_comments();
      if (at_end() || peek() == '|' || peek() == ')') break;
      if (peek() == '$' && depth_ == 0 && pos_ + 1 == src_.size()) {
        ++pos_;  // a trailing anchor is implied by full matching
        break;
      }
      const size_t here = pos_;
      int64_t lo = 0, hi = 0;
      if (read_quantifier(lo, hi)) fail_at(here, "nothing to repeat");
      items.push_back(parse_quantifier(parse_atom()));
    }
    return add_list(re_node::kind::seq, start, std::move(items));
  }

  // Python's comments (?#...), which may stand anywhere between atoms.
  void skip_comments() {
    while (src_.substr(pos_, 3) == "(?#") {
      const size_t close = src_.find(')', pos_);
      if (close == std::string_view::npos) fail("missing ), unterminated comment");
      pos_ = close + 1;
    }
  }

  // Reads a quantifier (* + ? {m} {m,} {,n} {m,n} {,}) into [lo, hi] (hi < 0:
  // unbounded) and moves past it. False, pos_ unchanged, when there is none;
  // a '{' that does not start a valid quantifier is a literal.
  bool read_quantifier(int64_t& lo, int64_t& hi) {
    if (at_end()) return false;
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      lo = c == '+' ? 1 : 0;
      hi = c == '?' ? 1 : -1;
      return true;
    }
    if (c != '{') return false;
    const auto digits = [this](size_t& p) {
      const size_t b = p;
      while (p < src_.size() && is_digit(src_[p])) ++p;
      return src_.substr(b, p - b);
    };
    size_t p = pos_ + 1;
    const std::string_view lo_digits = digits(p);
    std::string_view hi_digits = lo_digits;
    const bool comma = p < src_.size() && src_[p] == ',';
    if (comma) hi_digits = digits(++p);
    if (p >= src_.size() || src_[p] != '}' || (!comma && lo_digits.empty())) return false;
    lo = count(lo_digits, 0);
    hi = count(hi_digits, -1);
    if (hi >= 0 && hi < lo) fail("min repeat greater than max repeat");
    pos_ = p + 1;
    return true;
  }

  // The decimal number in digits (if_empty when there is none), at most k_max_repeat.
  int64_t count(std::string_view digits, int64_t if_empty) const {
    if (digits.empty()) return if_empty;
    int64_t v = 0;
    for (const char d : digits) {
      v = v * 10 + (d - '0');
      if (v > k_max_repeat) fail("repetition bound above " + std::to_string(k_max_repeat));
    }
    return v;
  }

  // atom followed by an optional quantifier (its lazy form matches the same strings).
  int32_t parse_quantifier(int32_t atom) {
    skip_comments();
    const size_t start = pos_;
    int64_t lo = 0, hi = -1;
    if (!read_quantifier(lo, hi)) return atom;
    if (peek() == '+') fail("possessive quantifiers are not supported");
    eat('?');
    skip_comments();
    const size_t next = pos_;
    int64_t lo2 = 0, hi2 = 0;
    if (read_quantifier(lo2, hi2)) fail_at(next, "multiple repeat");
    re_node n;
    n.type = re_node::kind::repeat;
    n.pos = start;
    n.kids = {atom};
    n.lo = lo;
    n.hi = hi;
    n.nullable = lo == 0 || nodes_[static_cast<size_t>(atom)].nullable;
    return add(std::move(n));
  }

  int32_t parse_atom() {
    const size_t start = pos_;
    switch (peek()) {
      case '(': return parse_group();
      case '[': return parse_class();
      case '.': ++pos_; return add_chars(start, complement({{'\n', '\n'}}));
      case '^': fail("anchor '^' is only supported at the start of the pattern");
      case '$': fail("anchor '$' is only supported at the end of the pattern");
      case '\\': return add_chars(start, parse_escape(false).ranges);
      default: {
        const uint32_t cp = parse_utf8();
        return add_chars(start, {{cp, cp}});
      }
    }
  }

  // One UTF-8 character of the pattern.
  uint32_t parse_utf8() {
    const auto b0 = static_cast<uint8_t>(peek());
    const size_t n = b0 < 0x80 ? 1 : b0 < 0xC2 ? 0 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : b0 < 0xF5 ? 4 : 0;
    if (n == 0 || pos_ + n > src_.size() || !utf8::is_valid(src_.substr(pos_, n))) fail("invalid UTF-8 in the pattern");
    uint32_t cp = n == 1 ? b0 : b0 & (0x7Fu >> n);
    for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<uint8_t>(src_[pos_ + i]) & 0x3Fu);
    pos_ += n;
    return cp;
  }

  // A backslash escape, outside or inside a class (where \b is backspace).
  char_item parse_escape(bool in_class) {
    const size_t start = pos_++;
    if (at_end()) fail_at(start, "bad escape (end of pattern)");
    const char c = peek();
    if (static_cast<uint8_t>(c) >= 0x80) return one_cp(parse_utf8());
    ++pos_;
    switch (c) {
      case 'd': return {k_digit, false};
      case 'D': return {complement(k_digit), false};
      case 'w': return {k_word, false};
      case 'W': return {complement(k_word), false};
      case 's': return {k_space, false};
      case 'S': return {complement(k_space), false};
      case 'n': return one_cp('\n');
      case 't': return one_cp('\t');
      case 'r': return one_cp('\r');
      case 'f': return one_cp('\f');
      case 'v': return one_cp('\v');
      case 'a': return one_cp('\a');
      case 'x': return one_cp(parse_hex(start, 2));
      case 'u': return one_cp(parse_hex(start, 4));
      case 'U': return one_cp(parse_hex(start, 8));
      case 'b':
        if (in_class) return one_cp('\b');
        fail_at(start, "\\b (word boundary) is not supported");
      case 'B': case 'A': case 'Z':
        if (!in_class) fail_at(start, std::string("anchor \\") + c + " is not supported");
        break;
      case 'N': fail_at(start, "named characters \\N{...} are not supported");
      case 'p': case 'P': fail_at(start, "Unicode property classes \\p{...} are not supported");
      default: break;
    }
    if (is_digit(c)) return one_cp(parse_number_escape(start, c, in_class));
    if (is_ascii_alnum(c)) fail_at(start, std::string("bad escape \\") + c);
    return one_cp(static_cast<uint8_t>(c));  // an escaped punctuation character is itself
  }

  // \ followed by digit c (consumed): an octal escape as Python reads it, else a backreference.
  uint32_t parse_number_escape(size_t start, char c, bool in_class) {
    if (c == '0' || (is_octal(c) && (in_class || (is_octal(peek()) && is_octal(peek(1)))))) {
      uint32_t v = static_cast<uint32_t>(c - '0');
      for (int i = 0; i < 2 && is_octal(peek()); ++i) v = v * 8 + static_cast<uint32_t>(src_[pos_++] - '0');
      if (v > 0377) fail_at(start, "octal escape outside of range 0-0o377");
      return v;
    }
    if (in_class) fail_at(start, std::string("bad escape \\") + c);
    fail_at(start, "backreferences are not supported");
  }

  // Exactly n hex digits: a code point at most U+10FFFF.
  uint32_t parse_hex(size_t start, int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      const int d = hex_value(peek());
      if (d < 0) fail_at(start, "incomplete escape: expected " + std::to_string(n) + " hex digits");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > k_max_code_point) fail_at(start, "escape above U+10FFFF");
    return v;
  }

  // [...] or [^...]; ']' first is literal, '-' first or last is literal.
  int32_t parse_class() {
    const size_t start = pos_++;
    const bool negated = eat('^');
    std::vector<cp_range> ranges;
    for (bool first = true;; first = false) {
      if (at_end()) fail_at(start, "unterminated character class");
      if (!first && eat(']')) break;
      const size_t item = pos_;
      char_item lo = parse_class_char();
      if (peek() == '-' && pos_ + 1 < src_.size() && peek(1) != ']') {
        ++pos_;
        const char_item hi = parse_class_char();
        if (!lo.single || !hi.single || hi.ranges[0].lo < lo.ranges[0].lo) {
          fail_at(item, "bad character range " + std::string(src_.substr(item, pos_ - item)));
        }
        lo.ranges[0].hi = hi.ranges[0].lo;
      }
      ranges.insert(ranges.end(), lo.ranges.begin(), lo.ranges.end());
    }
    if (negated) ranges = complement(std::move(ranges));
    if (!has_scalar(ranges)) fail_at(start, "the character class matches no character");
    return add_chars(start, std::move(ranges));
  }

  char_item parse_class_char() { return peek() == '\\' ? parse_escape(true) : one_cp(parse_utf8()); }

  // ( ), (?: ), (?P<name> ), (?<name> ); the other (? extensions are rejected.
  int32_t parse_group() {
    const size_t start = pos_++;
    if (++depth_ > k_max_nesting) fail_at(start, "groups nested deeper than " + std::to_string(k_max_nesting));
    if (eat('?')) parse_extension(start);
    const int32_t body = parse_alternation();
    if (!eat(')')) fail_at(start, "missing ), unterminated subpattern");
    --depth_;
    return body;
  }

  // After "(?": accepts ':' and group names, rejects the rest.
  void parse_extension(size_t start) {
    const char c = peek(), d = peek(1);
    if (eat(':')) return;
    if ((c == 'P' || c == '<') && (c == '<' ? d != '=' && d != '!' : d == '<')) {
      pos_ += c == 'P' ? 2 : 1;
      parse_group_name();
      return;
    }
    if (c == 'P' && d == '=') fail_at(start, "backreferences (?P=name) are not supported");
    if (c == '<') fail_at(start, "lookbehind assertions are not supported");
    if (c == '=' || c == '!') fail_at(start, "lookahead assertions are not supported");
    if (c == '>') fail_at(start, "atomic groups are not supported");
    if (c == '(') fail_at(start, "conditional groups are not supported");
    if (c != 'P' && (c == '-' || (is_ascii_alnum(c) && !is_digit(c)))) {
      fail_at(start, "inline flags (?flags) are not supported");
    }
    fail_at(start, "unknown extension (?" + std::string(src_.substr(pos_, at_end() ? 0 : 1)));
  }

  // name> of a named group: an identifier (ASCII word characters or non-ASCII, not
  // starting with a digit), unique in the pattern.
  void parse_group_name() {
    const size_t start = pos_;
    const size_t close = src_.find('>', pos_);
    if (close == std::string_view::npos) fail("missing >, unterminated name");
    const std::string name(src_.substr(start, close - start));
    const bool ok = !name.empty() && !is_digit(name[0]) && std::all_of(name.begin(), name.end(), [](char ch) {
      return is_ascii_alnum(ch) || ch == '_' || static_cast<uint8_t>(ch) >= 0x80;
    });
    if (!ok) fail("bad character in group name '" + name + "'");
    if (!names_.insert(name).second) fail("redefinition of group name '" + name + "'");
    pos_ = close + 1;
  }

  std::string_view src_;
  size_t pos_ = 0;
  int depth_ = 0;  // open groups
  std::vector<re_node> nodes_;
  std::set<std::string> names_;  // group names seen
};

// Turns a parsed pattern into builder symbols, in a form where no rule
// derives the empty string in more than one way: every node is emitted as
// plus(node), its non-empty strings (non-nullable alternatives), and a
// nullable node as (plus | ""). Hence a star or an optional never gets a
// nullable atom -- no left recursion -- and the matcher's parses do not
// multiply over empty derivations (nested repeats of nullable groups would
// otherwise create exponentially many duplicate stacks).
class regex_emitter {
 public:
  regex_emitter(grammar_builder& b, const std::vector<re_node>& nodes, regex_text mode)
      : b_(b), nodes_(nodes), mode_(mode) {}

  // The symbols for node root; builder errors get the regex position prefixed.
  alternative run(int32_t root) {
    try {
      return full(root);
    } catch (const grammar_error& e) {
      throw grammar_error("regex position " + std::to_string(pos_) + ": " + e.what());
    }
  }

 private:
  const re_node& node(int32_t id) const { return nodes_[static_cast<size_t>(id)]; }

  // All strings of node id, as symbols: plus(id), and "" when id is nullable.
  alternative full(int32_t id) {
    std::vector<alternative> p = plus(id);
    if (!node(id).nullable) return p.size() == 1 ? std::move(p[0]) : b_.group(std::move(p));
    if (p.empty()) return {};
    p.push_back({});
    return b_.group(std::move(p));
  }

  // The non-empty strings of node id, as non-nullable alternatives (none
  // when id matches only ""). Called once per node.
  std::vector<alternative> plus(int32_t id) {
    const re_node& n = node(id);
    pos_ = n.pos;
    switch (n.type) {
      case re_node::kind::chars:
        return {mode_ == regex_text::raw ? b_.code_points(n.ranges) : emit_json_chars(n.ranges)};
      case re_node::kind::alt: {
        std::vector<alternative> out;
        for (const int32_t k : n.kids) {
          std::vector<alternative> p = plus(k);
          out.insert(out.end(), std::make_move_iterator(p.begin()), std::make_move_iterator(p.end()));
        }
        return out;
      }
      case re_node::kind::seq: {
        if (n.nullable) return plus_nullable_seq(n);
        alternative out;  // a non-nullable kid makes the whole non-empty
        for (const int32_t k : n.kids) out = std::move(out) + full(k);
        return {std::move(out)};
      }
      case re_node::kind::repeat: return plus_repeat(n);
    }
    return {};
  }

  // K{lo,hi} minus "": with P = plus(K), K{lo,hi} == P{lo,hi}, or P{0,hi} when
  // K is nullable; without "" that is P{max(lo, 1),hi}.
  std::vector<alternative> plus_repeat(const re_node& n) {
    if (n.hi == 0) return {};
    const int32_t kid = n.kids[0];
    std::vector<alternative> p = plus(kid);
    if (p.empty()) return {};
    const int64_t lo = node(kid).nullable ? 1 : std::max<int64_t>(n.lo, 1);
    const alternative atom = as_atom(std::move(p));
    pos_ = n.pos;
    return {b_.repeat(atom, lo, n.hi)};
  }

  // K1 .. Kn minus "" when every Ki is nullable: the first non-empty Ki starts
  // the string and the rest follow in full. With A_i = plus(Ki) as one atom:
  // P_i = A_i T_{i+1} | P_{i+1} and T_i = A_i T_{i+1} | T_{i+1} (Ki .. Kn in
  // full), built from the end with a rule or two per step, so the size stays
  // linear in n and "" is derived in one way only.
  std::vector<alternative> plus_nullable_seq(const re_node& n) {
    std::vector<alternative> p;  // P_{i+1}
    alternative tail;            // T_{i+2}, or nothing
    alternative next_atom;       // A_{i+1}, to be folded into tail
    for (size_t i = n.kids.size(); i-- > 0;) {
      std::vector<alternative> ki = plus(n.kids[i]);
      if (ki.empty()) continue;  // Ki matches only ""
      const alternative atom = as_atom(std::move(ki));
      if (!next_atom.empty()) tail = {ref(b_.add_helper({next_atom + tail, tail}))};
      std::vector<alternative> next{atom + tail};
      if (!p.empty()) next.push_back(as_atom(std::move(p)));
      p = std::move(next);
      next_atom = atom;
    }
    return p;
  }

  // One symbol standing for the union of alts.
  alternative as_atom(std::vector<alternative> alts) {
    if (alts.size() == 1 && alts[0].size() == 1) return std::move(alts[0]);
    return b_.group(std::move(alts));
  }

  // One code point out of ranges as spelled inside a JSON string literal:
  // raw except '"', '\\' and controls; those (and '/') also as escapes.
  alternative emit_json_chars(const std::vector<cp_range>& ranges) {
    std::vector<cp_range> excluded = complement(ranges);
    excluded.insert(excluded.end(), {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}});
    const std::vector<cp_range> plain = complement(std::move(excluded));
    std::vector<alternative> alts;
    if (has_scalar(plain)) alts.push_back(b_.code_points(plain));
    symbol after_backslash;  // the one-letter escapes
    symbol last_hex[2];      // \u000X and \u001X: the last digit
    static constexpr char k_hex[] = "0123456789abcdef";
    for (const uint32_t cp : {uint32_t{'"'}, uint32_t{'\\'}, uint32_t{'/'}}) {
      if (contains(ranges, cp)) after_backslash.set.set(cp);
    }
    for (uint32_t cp = 0; cp < 0x20; ++cp) {
      if (!contains(ranges, cp)) continue;
      const char* short_form = cp == '\b' ? "b" : cp == '\f' ? "f" : cp == '\n' ? "n" : cp == '\r' ? "r" : cp == '\t' ? "t" : "";
      if (*short_form) after_backslash.set.set(static_cast<uint8_t>(*short_form));
      const char digit = k_hex[cp & 15];
      last_hex[cp >> 4].set.set(static_cast<uint8_t>(digit));
      if (digit >= 'a') last_hex[cp >> 4].set.set(static_cast<uint8_t>(digit - 'a' + 'A'));
    }
    if (after_backslash.set.any()) alts.push_back(grammar_builder::literal("\\") + after_backslash);
    for (size_t h = 0; h < 2; ++h) {
      if (last_hex[h].set.any()) alts.push_back(grammar_builder::literal(h ? "\\u001" : "\\u000") + last_hex[h]);
    }
    return alts.size() == 1 ? std::move(alts[0]) : b_.group(std::move(alts));
  }

  grammar_builder& b_;
  const std::vector<re_node>& nodes_;
  regex_text mode_;
  size_t pos_ = 0;  // pattern offset of the node being emitted, for errors
};

}  // namespace

alternative add_regex(grammar_builder& b, std::string_view pattern, regex_text mode) {
  regex_parser parser(pattern);
  const int32_t root = parser.parse();
  return regex_emitter(b, parser.nodes(), mode).run(root);
}

grammar compile_regex(std::string_view pattern) {
  grammar_builder b;
  alternative body = add_regex(b, pattern);
  const int32_t root = b.add_rule("root", {std::move(body)});
  return b.finish(root);
}

}  // namespace spate::grammar
