#include "grammar/grammar_ir.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "util/utf8.h"

namespace spate::grammar {
namespace {

constexpr uint32_t k_max_code_point = 0x10FFFF;

int utf8_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// [lo, hi] all of one encoded length, no surrogates: split until every piece's
// encodings differ only in a suffix of whole continuation ranges, then emit
// one byte-range sequence per piece.
void split_same_length(uint32_t lo, uint32_t hi, std::vector<std::vector<byte_range>>& out) {
  const int n = utf8_len(lo);
  for (int m = 1; m < n; ++m) {
    const uint32_t max = (1u << (6 * m)) - 1;
    if ((lo & ~max) != (hi & ~max)) {
      if ((lo & max) != 0) {
        split_same_length(lo, lo | max, out);
        split_same_length((lo | max) + 1, hi, out);
        return;
      }
      if ((hi & max) != max) {
        split_same_length(lo, (hi & ~max) - 1, out);
        split_same_length(hi & ~max, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  utf8::append(a, lo);
  utf8::append(b, hi);
  std::vector<byte_range> seq(static_cast<size_t>(n));
  for (size_t i = 0; i < seq.size(); ++i) seq[i] = {static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i])};
  out.push_back(std::move(seq));
}

// Symbols at the start of alternative `alt` that can be reached without
// consuming a byte, i.e. the rules referenced before the first non-nullable
// symbol (included).
void leading_rules(const alternative& alt, const std::vector<bool>& nullable, std::vector<int32_t>& out) {
  for (const symbol& s : alt) {
    if (s.type == symbol::kind::bytes) return;
    out.push_back(s.rule);
    if (!nullable[static_cast<size_t>(s.rule)]) return;
  }
}

// The least fixed point "rule r derives a string of kind K": r has an
// alternative whose byte symbols all pass bytes_ok and whose references all
// derive one. A worklist over reference occurrences keeps it linear in the
// grammar's size (a round-robin iteration is quadratic on long chains).
std::vector<bool> derivable_rules(const grammar& g, bool (*bytes_ok)(const symbol&)) {
  std::vector<bool> done(g.rules.size(), false);
  std::vector<int32_t> alt_rule;   // per alternative: its rule
  std::vector<size_t> pending;     // per alternative: references not yet derivable
  std::vector<std::vector<size_t>> users(g.rules.size());  // per rule: alternatives referring to it, per occurrence
  std::vector<int32_t> queue;
  for (size_t r = 0; r < g.rules.size(); ++r) {
    for (const alternative& alt : g.rules[r].alts) {
      const size_t id = alt_rule.size();
      alt_rule.push_back(static_cast<int32_t>(r));
      size_t refs = 0;
      bool blocked = false;
      for (const symbol& s : alt) {
        if (s.type == symbol::kind::bytes) {
          blocked = blocked || !bytes_ok(s);
        } else {
          ++refs;
          users[static_cast<size_t>(s.rule)].push_back(id);
        }
      }
      pending.push_back(blocked ? SIZE_MAX : refs);  // blocked: never reaches 0
      if (refs == 0 && !blocked && !done[r]) {
        done[r] = true;
        queue.push_back(static_cast<int32_t>(r));
      }
    }
  }
  while (!queue.empty()) {
    const int32_t r = queue.back();
    queue.pop_back();
    for (const size_t id : users[static_cast<size_t>(r)]) {
      if (pending[id] == SIZE_MAX || --pending[id] != 0) continue;
      const auto owner = static_cast<size_t>(alt_rule[id]);
      if (!done[owner]) {
        done[owner] = true;
        queue.push_back(static_cast<int32_t>(owner));
      }
    }
  }
  return done;
}

std::vector<bool> nullable_rules(const grammar& g) {
  return derivable_rules(g, [](const symbol&) { return false; });
}

bool symbol_productive(const symbol& s, const std::vector<bool>& productive) {
  return s.type == symbol::kind::bytes ? s.set.any() : productive[static_cast<size_t>(s.rule)];
}

// Rules reachable from the root through any alternative, in discovery order.
std::vector<int32_t> reachable_rules(const grammar& g) {
  std::vector<bool> seen(g.rules.size(), false);
  std::vector<int32_t> order{g.root};
  seen[static_cast<size_t>(g.root)] = true;
  for (size_t i = 0; i < order.size(); ++i) {
    for (const alternative& alt : g.rules[static_cast<size_t>(order[i])].alts) {
      for (const symbol& s : alt) {
        if (s.type == symbol::kind::rule && !seen[static_cast<size_t>(s.rule)]) {
          seen[static_cast<size_t>(s.rule)] = true;
          order.push_back(s.rule);
        }
      }
    }
  }
  return order;
}

}  // namespace

std::vector<bool> productive_rules(const grammar& g) {
  return derivable_rules(g, [](const symbol& s) { return s.set.any(); });
}

void prune_unproductive(grammar& g) {
  const std::vector<bool> productive = productive_rules(g);
  for (rule& r : g.rules) {
    std::erase_if(r.alts, [&](const alternative& alt) {
      return !std::all_of(alt.begin(), alt.end(), [&](const symbol& s) { return symbol_productive(s, productive); });
    });
  }
}

std::vector<std::vector<byte_range>> utf8_sequences(uint32_t lo, uint32_t hi) {
  std::vector<std::vector<byte_range>> out;
  hi = std::min(hi, k_max_code_point);
  // Pieces of one encoded length, with the surrogates cut out.
  static constexpr uint32_t k_bounds[][2] = {{0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, 0x10FFFF}};
  for (const auto& b : k_bounds) {
    const uint32_t a = std::max(lo, b[0]), z = std::min(hi, b[1]);
    if (a <= z) split_same_length(a, z, out);
  }
  return out;
}

namespace {

// Unproductive rules reachable from the root: see validate() in the header.
void check_productive(const grammar& g) {
  const std::vector<bool> productive = productive_rules(g);
  if (!productive[static_cast<size_t>(g.root)]) {
    throw grammar_error("the root rule '" + g.rules[static_cast<size_t>(g.root)].name +
                        "' cannot match any finite input (a recursion without a base case?)");
  }
  for (const int32_t r : reachable_rules(g)) {
    if (!productive[static_cast<size_t>(r)]) {
      throw grammar_error("rule '" + g.rules[static_cast<size_t>(r)].name +
                          "' can never complete (a recursion without a base case?): a generation entering it could not finish");
    }
  }
}

}  // namespace

void validate(const grammar& g) {
  if (g.root < 0 || static_cast<size_t>(g.root) >= g.rules.size()) throw grammar_error("the grammar has no root rule");
  if (g.rules.size() > k_max_rules) throw grammar_error("the grammar has more than " + std::to_string(k_max_rules) + " rules");
  for (const rule& r : g.rules) {
    for (const alternative& alt : r.alts) {
      for (const symbol& s : alt) {
        if (s.type == symbol::kind::rule && (s.rule < 0 || static_cast<size_t>(s.rule) >= g.rules.size())) {
          throw grammar_error("rule '" + r.name + "' refers to a rule that does not exist");
        }
      }
    }
  }
  // Left recursion: a path of leading references from a rule back to itself.
  const std::vector<bool> nullable = nullable_rules(g);
  std::vector<std::vector<int32_t>> lead(g.rules.size());
  for (size_t r = 0; r < g.rules.size(); ++r) {
    for (const alternative& alt : g.rules[r].alts) leading_rules(alt, nullable, lead[r]);
  }
  enum class mark : uint8_t { none, active, done };
  std::vector<mark> marks(g.rules.size(), mark::none);
  for (size_t start = 0; start < g.rules.size(); ++start) {
    if (marks[start] != mark::none) continue;
    // Iterative DFS: (rule, next lead index).
    std::vector<std::pair<int32_t, size_t>> stack{{static_cast<int32_t>(start), 0}};
    marks[start] = mark::active;
    while (!stack.empty()) {
      auto& [r, i] = stack.back();
      if (i == lead[static_cast<size_t>(r)].size()) {
        marks[static_cast<size_t>(r)] = mark::done;
        stack.pop_back();
        continue;
      }
      const int32_t next = lead[static_cast<size_t>(r)][i++];
      if (marks[static_cast<size_t>(next)] == mark::active) {
        throw grammar_error("rule '" + g.rules[static_cast<size_t>(next)].name +
                            "' is left-recursive (it can reach itself without consuming input)");
      }
      if (marks[static_cast<size_t>(next)] == mark::none) {
        marks[static_cast<size_t>(next)] = mark::active;
        stack.push_back({next, 0});
      }
    }
  }
  check_productive(g);
}

}  // namespace spate::grammar
