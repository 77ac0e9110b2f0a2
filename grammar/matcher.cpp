#include "grammar/matcher.h"

#include <algorithm>

namespace spate::grammar {
namespace {

void sort_unique(std::vector<parse_stack>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

matcher::matcher(std::shared_ptr<const grammar> g) : g_(std::move(g)) {
  const auto& root = g_->rules.at(static_cast<size_t>(g_->root));
  for (size_t a = 0; a < root.alts.size(); ++a) {
    if (!expand({{g_->root, static_cast<int32_t>(a), 0}}, stacks_)) break;
  }
  sort_unique(stacks_);
}

matcher::matcher(std::shared_ptr<const grammar> g, std::vector<parse_stack> stacks)
    : g_(std::move(g)), stacks_(std::move(stacks)) {}

const symbol& matcher::symbol_at(const grammar_pos& p) const {
  return g_->rules[static_cast<size_t>(p.rule)].alts[static_cast<size_t>(p.alt)][static_cast<size_t>(p.pos)];
}

bool matcher::at_end_of_alt(const grammar_pos& p) const {
  return static_cast<size_t>(p.pos) == g_->rules[static_cast<size_t>(p.rule)].alts[static_cast<size_t>(p.alt)].size();
}

bool matcher::expand(parse_stack s, std::vector<parse_stack>& out) const {
  // Work list of stacks still to move forward; each step either finishes a
  // stack (top is a byte set, or it is empty) or replaces it by its successors.
  std::vector<parse_stack> work{std::move(s)};
  while (!work.empty()) {
    parse_stack cur = std::move(work.back());
    work.pop_back();
    // Pop completed alternatives; the parent moves past its reference.
    while (!cur.empty() && at_end_of_alt(cur.back())) {
      cur.pop_back();
      if (!cur.empty()) ++cur.back().pos;
    }
    if (cur.empty() || symbol_at(cur.back()).type == symbol::kind::bytes) {
      if (out.size() >= k_max_stacks) return false;
      out.push_back(std::move(cur));
      continue;
    }
    const grammar_pos parent = cur.back();
    const int32_t ref = symbol_at(parent).rule;
    const bool tail = static_cast<size_t>(parent.pos) + 1 ==
                      g_->rules[static_cast<size_t>(parent.rule)].alts[static_cast<size_t>(parent.alt)].size();
    if (tail) cur.pop_back();  // nothing of the parent is left after the reference
    if (cur.size() >= k_max_stack_depth) return false;
    const auto& alts = g_->rules[static_cast<size_t>(ref)].alts;
    for (size_t a = 0; a < alts.size(); ++a) {
      if (work.size() + out.size() >= k_max_stacks) return false;
      parse_stack next = cur;
      next.push_back({ref, static_cast<int32_t>(a), 0});
      work.push_back(std::move(next));
    }
  }
  return true;
}

bool matcher::advance(uint8_t byte) {
  std::vector<parse_stack> next;
  for (const parse_stack& s : stacks_) {
    if (s.empty() || !symbol_at(s.back()).set.test(byte)) continue;
    parse_stack moved = s;
    ++moved.back().pos;
    if (!expand(std::move(moved), next)) return false;
  }
  if (next.empty()) return false;
  sort_unique(next);
  stacks_ = std::move(next);
  return true;
}

bool matcher::push(uint8_t byte) {
  saved_.push_back(stacks_);
  if (advance(byte)) return true;
  saved_.pop_back();
  return false;
}

void matcher::pop() {
  stacks_ = std::move(saved_.back());
  saved_.pop_back();
}

bool matcher::advance(std::string_view bytes) {
  const std::vector<parse_stack> saved = stacks_;
  for (const char c : bytes) {
    if (!advance(static_cast<uint8_t>(c))) {
      stacks_ = saved;
      return false;
    }
  }
  return true;
}

bool matcher::can_end() const {
  return std::any_of(stacks_.begin(), stacks_.end(), [](const parse_stack& s) { return s.empty(); });
}

std::bitset<256> matcher::allowed_bytes() const {
  std::bitset<256> out;
  for (const parse_stack& s : stacks_) {
    if (!s.empty()) out |= symbol_at(s.back()).set;
  }
  return out;
}

}  // namespace spate::grammar
