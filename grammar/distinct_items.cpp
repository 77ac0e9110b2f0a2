#include "grammar/distinct_items.h"

#include <algorithm>
#include <bitset>

#include "grammar/vocab_trie.h"

namespace spate::grammar {
namespace {

bool is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
// Bytes that continue a number or a literal (true, false, null).
bool is_scalar_char(uint8_t c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '+' || c == '-';
}
bool starts_scalar(uint8_t c) { return (c >= '0' && c <= '9') || c == '-' || c == 't' || c == 'f' || c == 'n'; }
// Items that end on a byte of their own; numbers and literals end at the next byte.
bool self_delimiting(char first) { return first == '{' || first == '[' || first == '"'; }
// The bytes that choose something: whitespace outside strings does not.
std::bitset<256> without_ws(std::bitset<256> s, bool in_string) {
  if (!in_string) {
    for (const uint8_t w : {' ', '\t', '\n', '\r'}) s.reset(w);
  }
  return s;
}

}  // namespace

void distinct_items::advance(uint8_t c, const matcher& m) {
  options_ = options_now();  // the choice this byte made
  step(c, m);
  next_allowed_ = m.allowed_bytes();
}

void distinct_items::push(uint8_t c) {
  text_.push_back(static_cast<char>(c));
  // Interned: a grammar has few distinct choice sets, so each byte costs 4.
  const auto [at, fresh] = option_ids_.try_emplace(options_, static_cast<uint32_t>(option_sets_.size()));
  if (fresh) option_sets_.push_back(options_);
  opts_.push_back(at->second);
}

void distinct_items::step(uint8_t c, const matcher& m) {
  if (in_string_) {
    push(c);
    if (escape_) {
      escape_ = false;
    } else if (c == '\\') {
      escape_ = true;
    } else if (c == '"') {
      in_string_ = false;
      if (key_string_) {
        key_string_ = false;
        key_end();
      } else {
        value_end(text_.size());
      }
    }
    return;
  }
  if (in_scalar_) {
    if (is_scalar_char(c)) {
      push(c);
      return;
    }
    in_scalar_ = false;
    value_end(text_.size());  // this byte is not part of it
  }
  if (is_ws(c)) return;  // whitespace outside strings is not kept: items compare without it
  frame& f = stack_.back();
  if (f.kind == ctx::top && c != '{' && c != '[') return;  // text between values
  push(c);
  switch (c) {
    case '{':
    case '[':
      value_start();
      open(c == '{' ? ctx::object : ctx::array, m);
      return;
    case '}':
    case ']':
      if (f.kind == (c == '}' ? ctx::object : ctx::array)) close();
      else reset();
      return;
    case '"':
      if (f.kind == ctx::object && f.expect_key) {
        key_string_ = true;
        f.expect_key = false;
        f.item_start = static_cast<int64_t>(text_.size()) - 1;  // an object's keys are its items
      } else {
        value_start();
      }
      in_string_ = true;
      return;
    case ':':
      if (f.kind != ctx::object) reset();
      return;
    case ',':
      if (f.kind == ctx::object) f.expect_key = true;
      else f.expect_item = true;
      return;
    default:
      if (starts_scalar(c) && !(f.kind == ctx::object && f.expect_key)) {
        value_start();
        in_scalar_ = true;
      } else {
        reset();
      }
  }
}

void distinct_items::value_start() {
  frame& f = stack_.back();
  if (f.kind == ctx::object || f.item_start >= 0) return;
  f.item_start = static_cast<int64_t>(text_.size()) - 1;
  f.expect_item = false;
}

void distinct_items::key_end() {
  frame& f = stack_.back();
  if (f.distinct && f.items.size() < k_max_items) f.items.push_back({static_cast<uint32_t>(f.item_start), static_cast<uint32_t>(text_.size())});
  f.item_start = -1;
}

void distinct_items::value_end(size_t end) {
  frame& f = stack_.back();
  if (f.kind == ctx::object || f.item_start < 0) return;
  if (f.repeat_ends) {
    const std::string_view text(text_);
    const std::string_view now = text.substr(static_cast<size_t>(f.item_start), end - static_cast<size_t>(f.item_start));
    f.repeated = f.repeated || std::any_of(f.items.begin(), f.items.end(),
                                           [&](const item& it) { return text.substr(it.begin, it.end - it.begin) == now; });
  }
  if (f.items.size() < k_max_items) f.items.push_back({static_cast<uint32_t>(f.item_start), static_cast<uint32_t>(end)});
  f.item_start = -1;
  if (f.kind == ctx::top) f.expect_item = true;
}

void distinct_items::open(ctx kind, const matcher& m) {
  if (stack_.size() > k_max_depth) {
    reset();
    return;
  }
  frame f;
  f.kind = kind;
  f.expect_key = kind == ctx::object;
  // A distinct rule counts once its first byte, its '[' or '{', is behind (a
  // parse may already have entered the rule of an item still to come).
  size_t most = 0;
  const grammar& g = *m.rules();
  const auto opened = [&](const grammar_pos& p) { return p.pos > 0 && g.rules[static_cast<size_t>(p.rule)].distinct; };
  for (const parse_stack& s : m.stacks()) {
    const auto n = static_cast<size_t>(std::count_if(s.begin(), s.end(), opened));
    if (n <= most) continue;
    most = n;
    // The innermost distinct rule opened: this array's own.
    const auto inner = std::find_if(s.rbegin(), s.rend(), opened);
    f.repeat_ends = kind == ctx::array && g.rules[static_cast<size_t>(inner->rule)].repeat_ends;
  }
  f.distinct = most > distinct_open();
  if (!f.distinct) f.repeat_ends = false;
  stack_.push_back(std::move(f));
}

void distinct_items::close() {
  stack_.pop_back();
  value_end(text_.size());
}

void distinct_items::reset() {
  stack_.resize(1);
  stack_[0].item_start = -1;
  stack_[0].expect_item = true;
  in_string_ = escape_ = in_scalar_ = key_string_ = false;
}

size_t distinct_items::distinct_open() const {
  return static_cast<size_t>(std::count_if(stack_.begin() + 1, stack_.end(), [](const frame& f) { return f.distinct; }));
}

bool distinct_items::active() const {
  return std::any_of(stack_.begin(), stack_.end(), [&](const frame& f) {
    return (f.distinct || (f.kind == ctx::top && top_distinct_)) && !f.items.empty();
  });
}

// The earlier items that start with what the current one has written, as a
// trie of their rests. A node is dead when every way on from it repeats an
// item: an item ends there, or each byte the grammar allowed there (as the
// items were written) leads to a dead node. The tokens to refuse are those
// that reach a dead node whose parent is not: the decision for a repeat.
// Numbers and literals (no closing byte of their own) are refused at the
// delimiter after them instead.
void distinct_items::patterns_of(const frame& f, std::vector<pattern>& out) const {
  if (!(f.distinct || (f.kind == ctx::top && top_distinct_)) || f.items.empty()) return;
  if (f.repeat_ends) {  // a repeat is let through; after it the array ends (the top level: must_end)
    if (f.repeated && f.kind == ctx::array && f.item_start < 0 && !f.expect_item) out.push_back(pattern_of(",", 0, 1, false));
    return;
  }
  const std::string_view text(text_);
  const std::string_view written = f.item_start >= 0 ? text.substr(static_cast<size_t>(f.item_start)) : std::string_view();
  // After an item of an array: a ',' is the decision when every next item repeats.
  const bool before_comma = f.kind == ctx::array && f.item_start < 0 && !f.expect_item;
  if (f.item_start < 0 && !before_comma && !(f.kind == ctx::object ? f.expect_key : f.expect_item)) return;
  struct node {
    std::vector<std::pair<uint8_t, int32_t>> kids;
    int32_t parent = -1;
    uint32_t at = 0;     // text_ offset of the byte after this node in some item through it
    uint32_t item = 0;   // that item's begin
    uint32_t depth = 0;  // bytes from the root
    bool end = false;
  };
  std::vector<node> trie(1);
  for (const auto& it : f.items) {
    const std::string_view c = text.substr(it.begin, it.end - it.begin);
    if (!c.starts_with(written)) continue;
    if (!self_delimiting(c[0])) {
      if (!before_comma) out.push_back(pattern_of(c, written.size(), c.size(), true));  // decided by the delimiter after it
      continue;
    }
    int32_t n = 0;
    for (size_t k = written.size(); k < c.size(); ++k) {
      trie[static_cast<size_t>(n)].at = static_cast<uint32_t>(it.begin + k);
      trie[static_cast<size_t>(n)].item = it.begin;
      const auto b = static_cast<uint8_t>(c[k]);
      auto& kids = trie[static_cast<size_t>(n)].kids;
      const auto hit = std::find_if(kids.begin(), kids.end(), [&](const auto& e) { return e.first == b; });
      if (hit != kids.end()) {
        n = hit->second;
        continue;
      }
      const auto child = static_cast<int32_t>(trie.size());
      kids.emplace_back(b, child);
      node next;
      next.parent = n;
      next.depth = trie[static_cast<size_t>(n)].depth + 1;
      next.item = it.begin;
      trie.push_back(std::move(next));
      n = child;
    }
    trie[static_cast<size_t>(n)].end = true;
  }
  if (trie.size() == 1) return;
  // Children come after their parents: decide deadness from the back.
  std::vector<bool> dead(trie.size(), false);
  for (size_t i = trie.size(); i-- > 0;) {
    const node& nd = trie[i];
    if (nd.end) {
      dead[i] = true;
      continue;
    }
    const std::bitset<256> options = i > 0 ? option_sets_[opts_[nd.at]] : before_comma ? first_options(f) : options_now();
    bool all = options.any();
    for (size_t b = 0; b < 256 && all; ++b) {
      if (!options.test(b)) continue;
      const auto hit = std::find_if(nd.kids.begin(), nd.kids.end(), [&](const auto& e) { return e.first == b; });
      all = hit != nd.kids.end() && dead[static_cast<size_t>(hit->second)];
    }
    dead[i] = all;
  }
  if (before_comma) {
    if (dead[0]) out.push_back(pattern_of(",", 0, 1, false));
    return;
  }
  if (dead[0]) return;  // every way on repeats: too late to steer (it was decided in one token)
  for (size_t i = 1; i < trie.size(); ++i) {
    if (!dead[i] || dead[static_cast<size_t>(trie[i].parent)]) continue;
    const std::string_view c = text.substr(trie[i].item);
    out.push_back(pattern_of(c, written.size(), written.size() + trie[i].depth, false));
  }
}

distinct_items::pattern distinct_items::pattern_of(std::string_view item, size_t from, size_t to, bool needs_delim) {
  pattern p;
  p.rest = item.substr(from, to - from);
  p.needs_delim = needs_delim;
  // Which bytes of the rest are inside a string (whitespace there is literal).
  bool in = false, esc = false;
  for (size_t i = 0; i < to; ++i) {
    if (i >= from) p.in_string.push_back(in);
    if (esc) esc = false;
    else if (in && item[i] == '\\') esc = true;
    else if (item[i] == '"') in = !in;
  }
  return p;
}

// The choices at the first byte of an item after a ',' (as the earlier items
// were written; the first item's also allowed the array's end).
std::bitset<256> distinct_items::first_options(const frame& f) const {
  std::bitset<256> o = option_sets_[opts_[f.items.back().begin]];
  if (f.items.size() == 1) o.reset(']');
  return o;
}

std::bitset<256> distinct_items::options_now() const { return without_ws(next_allowed_, in_string_); }

namespace {

// The pattern automaton: states 0..n match rest, skipping whitespace outside
// strings; n + 1 is past the delimiter; -1 refuses.
int32_t step_pattern(const distinct_items_pattern& p, int32_t s, uint8_t b) {
  const auto n = static_cast<int32_t>(p.rest.size());
  if (s < n) {
    if (b == static_cast<uint8_t>(p.rest[static_cast<size_t>(s)])) return s + 1;
    return is_ws(b) && !p.in_string[static_cast<size_t>(s)] ? s : -1;
  }
  if (!p.needs_delim || s > n) return s;
  return is_scalar_char(b) ? -1 : n + 1;
}

}  // namespace

void distinct_items::blocked_tokens(const vocab_trie& trie, const std::vector<std::string>& pieces,
                                    std::vector<int32_t>& out) const {
  std::vector<pattern> pats;
  for (const frame& f : stack_) patterns_of(f, pats);
  for (const pattern& p : pats) {
    const auto done = static_cast<int32_t>(p.rest.size()) + (p.needs_delim ? 1 : 0);
    const auto step = [&](int32_t s, uint8_t b) { return step_pattern(p, s, b); };
    trie.walk(0, step, [&](int32_t id) {
      int32_t s = 0;
      for (const char c : pieces[static_cast<size_t>(id)]) s = step(s, static_cast<uint8_t>(c));
      if (s >= done) out.push_back(id);
    });
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

}  // namespace spate::grammar
