#include "grammar/gbnf_parser.h"

#include "grammar/grammar_builder.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace spate::grammar {
namespace {

class gbnf_parser {
 public:
  explicit gbnf_parser(std::string_view src) : src_(src), b_([this] { return position(); }) {}

  grammar run() {
    if (src_.size() > k_max_grammar_source_bytes) {
      throw grammar_error("the grammar is longer than " + std::to_string(k_max_grammar_source_bytes) + " bytes");
    }
    skip_space(true);
    while (pos_ < src_.size()) {
      parse_rule_definition();
      skip_space(true);
    }
    for (const auto& [name, id] : ids_) {
      if (!defined_[static_cast<size_t>(id)]) throw grammar_error("rule '" + name + "' is used but never defined");
    }
    const auto root = ids_.find("root");
    if (root == ids_.end()) throw grammar_error("the grammar has no 'root' rule");
    return b_.finish(root->second);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw grammar_error(position() + what); }

  std::string position() const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(col) + ": ";
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
    const int32_t id = b_.declare_rule(name);
    defined_.resize(b_.n_rules(), true);
    defined_[static_cast<size_t>(id)] = false;
    ids_.emplace(std::move(name), id);
    return id;
  }

  void parse_rule_definition() {
    const std::string name = parse_name();
    skip_space(false);
    if (src_.substr(pos_, 3) != "::=") fail("expected '::=' after rule name '" + name + "'");
    pos_ += 3;
    skip_space(true);
    const int32_t id = rule_id(name);
    if (defined_[static_cast<size_t>(id)]) fail("rule '" + name + "' is defined twice");
    b_.set_alts(id, parse_alternatives(false));
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
        seq = seq + b_.code_points({{0, k_max_code_point}});
      } else if (c == '(') {
        parse_group(seq);
      } else if (is_name_char(c)) {
        seq.push_back(ref(rule_id(parse_name())));
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
    seq = seq + b_.group(std::move(alts));
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
    seq = seq + b_.repeat(atom, lo, hi);
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
      const uint32_t cp = parse_char();
      seq = seq + b_.code_points({{cp, cp}});
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
    seq = seq + b_.code_points(negated ? complement(ranges) : ranges);
  }

  std::string_view src_;
  size_t pos_ = 0;
  grammar_builder b_;
  std::unordered_map<std::string, int32_t> ids_;  // user-named rules
  std::vector<bool> defined_;                      // per rule: has a definition
  int depth_ = 0;
};

}  // namespace

grammar parse_gbnf(std::string_view source) { return gbnf_parser(source).run(); }

}  // namespace spate::grammar
