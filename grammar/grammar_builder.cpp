#include "grammar/grammar_builder.h"

#include <algorithm>
#include <utility>

namespace spate::grammar {

std::vector<cp_range> complement(std::vector<cp_range> rs) {
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

symbol bytes_symbol(uint8_t lo, uint8_t hi) {
  symbol s;
  for (int b = lo; b <= hi; ++b) s.set.set(static_cast<size_t>(b));
  return s;
}

symbol ref(int32_t rule) {
  symbol s;
  s.type = symbol::kind::rule;
  s.rule = rule;
  return s;
}

alternative operator+(alternative a, const alternative& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

alternative operator+(alternative a, const symbol& s) {
  a.push_back(s);
  return a;
}

void grammar_builder::fail(const std::string& what) const {
  throw grammar_error((where_ ? where_() : std::string()) + what);
}

void grammar_builder::count_symbols(const std::vector<alternative>& alts) {
  for (const auto& a : alts) n_symbols_ += a.size();
  if (n_symbols_ > k_max_symbols) fail("the grammar expands to more than " + std::to_string(k_max_symbols) + " symbols");
}

int32_t grammar_builder::declare_rule(std::string name) {
  if (g_.rules.size() >= k_max_rules) fail("the grammar has more than " + std::to_string(k_max_rules) + " rules");
  g_.rules.push_back({std::move(name), {}});
  return static_cast<int32_t>(g_.rules.size() - 1);
}

void grammar_builder::set_alts(int32_t rule, std::vector<alternative> alts) {
  count_symbols(alts);
  g_.rules.at(static_cast<size_t>(rule)).alts = std::move(alts);
}

int32_t grammar_builder::add_rule(std::string name, std::vector<alternative> alts) {
  const int32_t id = declare_rule(std::move(name));
  set_alts(id, std::move(alts));
  return id;
}

int32_t grammar_builder::add_helper(std::vector<alternative> alts) {
  return add_rule("." + std::to_string(g_.rules.size()), std::move(alts));
}

alternative grammar_builder::literal(std::string_view s) {
  alternative a;
  a.reserve(s.size());
  for (const char c : s) a.push_back(bytes_symbol(static_cast<uint8_t>(c), static_cast<uint8_t>(c)));
  return a;
}

alternative grammar_builder::code_points(const std::vector<cp_range>& ranges) {
  std::vector<std::vector<byte_range>> seqs;
  for (const auto& r : ranges) {
    auto part = utf8_sequences(r.lo, r.hi);
    seqs.insert(seqs.end(), part.begin(), part.end());
  }
  if (seqs.empty()) fail("the character class matches nothing");
  alternative out;
  if (seqs.size() == 1) {
    for (const auto& br : seqs[0]) out.push_back(bytes_symbol(br.lo, br.hi));
    return out;
  }
  if (std::all_of(seqs.begin(), seqs.end(), [](const auto& s) { return s.size() == 1; })) {
    symbol s;
    for (const auto& q : seqs) s.set |= bytes_symbol(q[0].lo, q[0].hi).set;
    out.push_back(s);
    return out;
  }
  std::vector<alternative> alts;
  for (const auto& q : seqs) {
    alternative a;
    for (const auto& br : q) a.push_back(bytes_symbol(br.lo, br.hi));
    alts.push_back(std::move(a));
  }
  out.push_back(ref(add_helper(std::move(alts))));
  return out;
}

alternative grammar_builder::repeat(const alternative& atom, int64_t lo, int64_t hi) {
  if (lo > k_max_repeat || hi > k_max_repeat) fail("repetition bound above " + std::to_string(k_max_repeat));
  alternative seq;
  for (int64_t i = 0; i < lo; ++i) {
    seq.insert(seq.end(), atom.begin(), atom.end());
    if (seq.size() > k_max_symbols) fail("repetition expands to too many symbols");
  }
  if (hi < 0) {
    // star ::= atom star | (empty), right-recursive: the matcher runs it in bounded depth.
    const int32_t star = declare_rule("." + std::to_string(g_.rules.size()));
    set_alts(star, {atom + ref(star), {}});
    seq.push_back(ref(star));
    return seq;
  }
  // hi - lo nested optionals: opt_k ::= atom opt_{k-1} | (empty).
  int32_t inner = -1;
  for (int64_t k = 0; k < hi - lo; ++k) {
    alternative more = atom;
    if (inner >= 0) more.push_back(ref(inner));
    const int32_t outer = add_helper({std::move(more), {}});
    g_.rules[static_cast<size_t>(outer)].repeat_left = static_cast<int32_t>(k + 1);
    g_.rules[static_cast<size_t>(outer)].repeat_next = inner;
    inner = outer;
  }
  if (inner >= 0) seq.push_back(ref(inner));
  return seq;
}

alternative grammar_builder::group(std::vector<alternative> alts) { return {ref(add_helper(std::move(alts)))}; }

int32_t grammar_builder::embed(const grammar& g) {
  const auto offset = static_cast<int32_t>(g_.rules.size());
  for (const rule& r : g.rules) declare_rule(r.name);
  for (size_t i = 0; i < g.rules.size(); ++i) {
    rule copy = g.rules[i];
    for (alternative& a : copy.alts) {
      for (symbol& s : a) {
        if (s.type == symbol::kind::rule) s.rule += offset;
      }
    }
    if (copy.repeat_next >= 0) copy.repeat_next += offset;
    count_symbols(copy.alts);
    g_.rules[static_cast<size_t>(offset) + i] = std::move(copy);
  }
  if (g.distinct_top_level) g_.distinct_top_level = true;
  return g.root + offset;
}

grammar grammar_builder::finish(int32_t root) {
  g_.root = root;
  validate(g_);
  return std::move(g_);
}

}  // namespace spate::grammar
