#include "grammar/gbnf_parser.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace spate::grammar {
namespace {

constexpr uint32_t k_max_code_point = 0x10FFFF;
constexpr size_t k_max_symbols = 1u << 22;  // all alternatives together, after repetition

struct cp_range {
  uint32_t lo, hi;
};

class gbnf_parser {
 public:
  explicit gbnf_parser(std::string_view src) : src_(src) {}

  grammar run() {
    if (src_.size() > k_max_grammar_source_bytes) {
      throw grammar_error("the grammar is longer than " + std::to_string(k_max_grammar_source_bytes) + " bytes");
    }
    skip_space(true);
    while (pos_ < src_.size()) {
      parse_rule_definition();
      skip_space(true);
    }
    for (size_t r = 0; r < g_.rules.size(); ++r) {
      if (!defined_[r] && !g_.rules[r].name.empty() && g_.rules[r].name[0] != '.') {
        throw grammar_error("rule '" + g_.rules[r].name + "' is used but never defined");
      }
    }
    const auto root = ids_.find("root");
    if (root == ids_.end()) throw grammar_error("the grammar has no 'root' rule");
    g_.root = root->second;
    validate(g_);
    return std::move(g_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw grammar_error("line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
  }

  bool at_end() const { return pos_ >= src_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0'; }

  // Spaces, tabs and comments; newlines too when newline_ok.
  void skip_space(bool newline_ok) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        return;
      }
    }
  }

  static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    if (pos_ == start) fail("expected a rule name");
    return std::string(src_.substr(start, pos_ - start));
  }

  int32_t rule_id(const std::string& name) {
    const auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    return new_rule(name);
  }

  int32_t new_rule(std::string name) {
    if (g_.rules.size() >= k_max_rules) fail("the grammar has more than " + std::to_string(k_max_rules) + " rules");
    const auto id = static_cast<int32_t>(g_.rules.size());
    g_.rules.push_back({name, {}});
    defined_.push_back(false);
    if (name[0] != '.') ids_.emplace(std::move(name), id);
    return id;
  }

  // A helper rule for desugaring (its name starts with '.', never user-visible).
  int32_t helper_rule(std::vector<alternative> alts) {
    const int32_t id = new_rule("." + std::to_string(g_.rules.size()));
    count_symbols(alts);
    g_.rules[static_cast<size_t>(id)].alts = std::move(alts);
    defined_[static_cast<size_t>(id)] = true;
    return id;
  }

  void count_symbols(const std::vector<alternative>& alts) {
    for (const auto& a : alts) n_symbols_ += a.size();
    if (n_symbols_ > k_max_symbols) fail("the grammar expands to more than " + std::to_string(k_max_symbols) + " symbols");
  }

  void parse_rule_definition() {
    const std::string name = parse_name();
    skip_space(false);
    if (src_.substr(pos_, 3) != "::=") fail("expected '::=' after rule name '" + name + "'");
    pos_ += 3;
    skip_space(true);
    const int32_t id = rule_id(name);
    if (defined_[static_cast<size_t>(id)]) fail("rule '" + name + "' is defined twice");
    std::vector<alternative> alts = parse_alternatives(false);
    count_symbols(alts);
    g_.rules[static_cast<size_t>(id)].alts = std::move(alts);
    defined_[static_cast<size_t>(id)] = true;
    if (!at_end() && peek() != '\n' && peek() != '\r') fail(std::string("unexpected '") + peek() + "'");
  }

  std::vector<alternative> parse_alternatives(bool nested) {
    std::vector<alternative> alts;
    alts.push_back(parse_sequence(nested));
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      alts.push_back(parse_sequence(nested));
    }
    return alts;
  }

  alternative parse_sequence(bool nested) {
    alternative seq;
    for (;;) {
      const size_t atom_start = seq.size();
      const char c = peek();
      if (c == '"') {
        parse_literal(seq);
      } else if (c == '[') {
        parse_class(seq);
      } else if (c == '.') {
        ++pos_;
        push_code_points(seq, {{0, k_max_code_point}});
      } else if (c == '(') {
        parse_group(seq);
      } else if (is_name_char(c)) {
        symbol s;
        s.type = symbol::kind::rule;
        s.rule = rule_id(parse_name());
        seq.push_back(s);
      } else {
        return seq;  // '|', ')', newline, end: the caller decides
      }
      skip_space(nested);
      parse_repetition(seq, atom_start, nested);
    }
  }

  void parse_group(alternative& seq) {
    ++pos_;
    if (++depth_ > k_max_nesting) fail("parentheses nested deeper than " + std::to_string(k_max_nesting));
    skip_space(true);
    std::vector<alternative> alts = parse_alternatives(true);
    if (peek() != ')') fail("expected ')'");
    ++pos_;
    --depth_;
    symbol s;
    s.type = symbol::kind::rule;
    s.rule = helper_rule(std::move(alts));
    seq.push_back(s);
  }

  // Applies a postfix operator, if any, to the atom seq[atom_start, end).
  void parse_repetition(alternative& seq, size_t atom_start, bool nested) {
    int64_t lo = 0, hi = -1;  // hi -1: unbounded
    const char c = peek();
    if (c == '*') {
      ++pos_;
    } else if (c == '+') {
      ++pos_;
      lo = 1;
    } else if (c == '?') {
      ++pos_;
      hi = 1;
    } else if (c == '{') {
      parse_bounds(lo, hi);
    } else {
      return;
    }
    skip_space(nested);
    const alternative atom(seq.begin() + static_cast<std::ptrdiff_t>(atom_start), seq.end());
    seq.resize(atom_start);
    for (int64_t i = 0; i < lo; ++i) seq.insert(seq.end(), atom.begin(), atom.end());
    if (seq.size() > k_max_symbols) fail("repetition expands to too many symbols");
    symbol tail;
    tail.type = symbol::kind::rule;
    if (hi < 0) {
      // star ::= atom star | (empty), right-recursive.
      const int32_t star = new_rule("." + std::to_string(g_.rules.size()));
      alternative more = atom;
      symbol self;
      self.type = symbol::kind::rule;
      self.rule = star;
      more.push_back(self);
      count_symbols({more});
      g_.rules[static_cast<size_t>(star)].alts = {std::move(more), {}};
      defined_[static_cast<size_t>(star)] = true;
      tail.rule = star;
      seq.push_back(tail);
      return;
    }
    // hi - lo nested optionals: opt_k ::= atom opt_{k-1} | (empty).
    int32_t inner = -1;
    for (int64_t k = 0; k < hi - lo; ++k) {
      alternative more = atom;
      if (inner >= 0) {
        symbol s;
        s.type = symbol::kind::rule;
        s.rule = inner;
        more.push_back(s);
      }
      inner = helper_rule({std::move(more), {}});
    }
    if (inner >= 0) {
      tail.rule = inner;
      seq.push_back(tail);
    }
  }

  void parse_bounds(int64_t& lo, int64_t& hi) {
    ++pos_;
    skip_space(false);
    lo = parse_count();
    hi = lo;
    skip_space(false);
    if (peek() == ',') {
      ++pos_;
      skip_space(false);
      hi = peek() == '}' ? -1 : parse_count();
      skip_space(false);
    }
    if (peek() != '}') fail("expected '}' to close the repetition bounds");
    ++pos_;
    if (hi >= 0 && hi < lo) fail("repetition {" + std::to_string(lo) + "," + std::to_string(hi) + "} has max < min");
  }

  int64_t parse_count() {
    if (!(peek() >= '0' && peek() <= '9')) fail("expected a number");
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      ++pos_;
      if (v > k_max_repeat) fail("repetition bound above " + std::to_string(k_max_repeat));
    }
    return v;
  }

  // One character of a literal or class: an escape, or one UTF-8 character.
  uint32_t parse_char() {
    if (at_end()) fail("unexpected end of the grammar");
    const auto b = static_cast<unsigned char>(peek());
    if (b == '\\') return parse_escape();
    if (b < 0x80) {
      ++pos_;
      return b;
    }
    const int n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
    if (n == 0 || pos_ + static_cast<size_t>(n) > src_.size()) fail("invalid UTF-8 in the grammar");
    uint32_t cp = b & (0x7F >> n);
    for (int i = 1; i < n; ++i) {
      const auto c = static_cast<unsigned char>(src_[pos_ + static_cast<size_t>(i)]);
      if ((c & 0xC0) != 0x80) fail("invalid UTF-8 in the grammar");
      cp = (cp << 6) | (c & 0x3F);
    }
    pos_ += static_cast<size_t>(n);
    return cp;
  }

  uint32_t parse_escape() {
    ++pos_;
    const char c = peek();
    ++pos_;
    switch (c) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '\\': case '"': case '[': case ']': case '-': case '/': return static_cast<uint32_t>(c);
      case 'x': return parse_hex(2);
      case 'u': return parse_hex(4);
      case 'U': return parse_hex(8);
      default: fail(std::string("unknown escape '\\") + c + "'");
    }
  }

  uint32_t parse_hex(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      const char c = peek();
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) fail("expected " + std::to_string(n) + " hex digits");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > k_max_code_point || (v >= 0xD800 && v <= 0xDFFF)) fail("escape is not a Unicode scalar value");
    return v;
  }

  void parse_literal(alternative& seq) {
    ++pos_;
    while (peek() != '"') {
      if (at_end() || peek() == '\n') fail("unterminated string literal");
      push_code_points(seq, {{parse_char(), 0}}, true);
    }
    ++pos_;
  }

  void parse_class(alternative& seq) {
    ++pos_;
    const bool negated = peek() == '^';
    if (negated) ++pos_;
    std::vector<cp_range> ranges;
    while (peek() != ']') {
      if (at_end() || peek() == '\n') fail("unterminated character class");
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']') {
        ++pos_;
        hi = parse_char();
        if (hi < lo) fail("character range is out of order");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    push_code_points(seq, negated ? complement(ranges) : ranges);
  }

  static std::vector<cp_range> complement(std::vector<cp_range> rs) {
    std::sort(rs.begin(), rs.end(), [](const cp_range& a, const cp_range& b) { return a.lo < b.lo; });
    std::vector<cp_range> out;
    uint32_t next = 0;
    for (const auto& r : rs) {
      if (r.lo > next) out.push_back({next, r.lo - 1});
      next = std::max(next, r.hi + 1);
    }
    if (next <= k_max_code_point) out.push_back({next, k_max_code_point});
    return out;
  }

  // Appends symbols matching one code point out of ranges. single: ranges is
  // one code point in .lo (a literal character): its bytes, one symbol each.
  void push_code_points(alternative& seq, const std::vector<cp_range>& ranges, bool single = false) {
    std::vector<std::vector<byte_range>> seqs;
    for (const auto& r : ranges) {
      auto part = utf8_sequences(r.lo, single ? r.lo : r.hi);
      seqs.insert(seqs.end(), part.begin(), part.end());
    }
    if (seqs.empty()) fail("the character class matches nothing");
    if (seqs.size() == 1 || std::all_of(seqs.begin(), seqs.end(), [](const auto& s) { return s.size() == 1; })) {
      if (seqs.size() == 1) {
        for (const auto& br : seqs[0]) seq.push_back(bytes_symbol(br.lo, br.hi));
        return;
      }
      symbol s;
      for (const auto& q : seqs) s.set |= bytes_symbol(q[0].lo, q[0].hi).set;
      seq.push_back(s);
      return;
    }
    std::vector<alternative> alts;
    for (const auto& q : seqs) {
      alternative a;
      for (const auto& br : q) a.push_back(bytes_symbol(br.lo, br.hi));
      alts.push_back(std::move(a));
    }
    symbol s;
    s.type = symbol::kind::rule;
    s.rule = helper_rule(std::move(alts));
    seq.push_back(s);
  }

  static symbol bytes_symbol(uint8_t lo, uint8_t hi) {
    symbol s;
    for (int b = lo; b <= hi; ++b) s.set.set(static_cast<size_t>(b));
    return s;
  }

  std::string_view src_;
  size_t pos_ = 0;
  grammar g_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<bool> defined_;
  int depth_ = 0;
  size_t n_symbols_ = 0;
};

}  // namespace

grammar parse_gbnf(std::string_view source) { return gbnf_parser(source).run(); }

}  // namespace spate::grammar
