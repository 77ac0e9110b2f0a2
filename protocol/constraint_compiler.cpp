#include "protocol/constraint_compiler.h"

#include <algorithm>
#include <limits>

#include "grammar/distinct_items.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar_builder.h"
#include "grammar/json_schema.h"
#include "grammar/mask_cache.h"
#include "grammar/matcher.h"
#include "grammar/regex_compiler.h"
#include "grammar/vocab_trie.h"
#include "protocol/openai_request.h"
#include "protocol/tool_grammar.h"
#include "tokenizer/tokenizer.h"

namespace spate::api {
namespace {

using kind = output_constraint::kind;

// One request's automaton: a matcher over the shared grammar, masks from the
// shared cache (which locks), and the run-time check of distinct items
// (grammar/distinct_items.h) on top. One thread at a time, as
// token_constraint says.
class grammar_constraint final : public token_constraint {
 public:
  grammar_constraint(std::shared_ptr<const grammar::grammar> g, std::shared_ptr<grammar::mask_cache> masks,
                     std::shared_ptr<const grammar::vocab_trie> trie, std::shared_ptr<const std::vector<std::string>> pieces)
      : m_(g), masks_(std::move(masks)), trie_(std::move(trie)), pieces_(std::move(pieces)) {
    if (g->distinct_top_level || std::any_of(g->rules.begin(), g->rules.end(), [](const auto& r) { return r.distinct; })) {
      distinct_.emplace(g->distinct_top_level);
    }
  }

  void mask_logits(std::span<float> logits) override {
    const auto mask = masks_->mask(m_);
    mask->apply(logits);
    int64_t n_allowed = mask->n_allowed;
    if (distinct_ && distinct_->must_end() && mask->can_end) {
      // A tool call repeated an earlier one: the list ends here (only the end-of-generation tokens stay).
      std::fill(logits.begin(), logits.end(), -std::numeric_limits<float>::infinity());
      n_allowed = 0;
    } else if (distinct_ && distinct_->active()) {
      blocked_.clear();
      distinct_->blocked_tokens(*trie_, *pieces_, blocked_);
      for (const int32_t id : blocked_) {
        if (!mask->allows(id)) continue;
        logits[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
        --n_allowed;
      }
    }
    // No token can continue and the grammar is not complete: the matcher hit
    // a bound (live parses, stack depth), the vocabulary cannot spell the
    // next byte, or every way on repeats an item. End the output rather than
    // sample from nothing.
    dead_end_ = n_allowed <= 0 && !mask->can_end;
  }
  bool can_end() const override { return m_.can_end() || dead_end_; }
  void accept(int32_t token) override {
    // The mask allowed it, so the bytes are accepted; a token outside the
    // mask (a stop_token_id let through at the end) leaves the state as is.
    if (token < 0 || static_cast<size_t>(token) >= pieces_->size()) return;
    const std::string& piece = (*pieces_)[static_cast<size_t>(token)];
    if (!distinct_) {
      m_.advance(piece);
      return;
    }
    grammar::matcher before = m_;
    for (const char c : piece) {
      if (!m_.advance(static_cast<uint8_t>(c))) {
        m_ = std::move(before);  // all or nothing, as advance(string)
        return;
      }
      distinct_->advance(static_cast<uint8_t>(c), m_);
    }
  }
  bool finished() const override { return m_.finished(); }

 private:
  grammar::matcher m_;
  std::shared_ptr<grammar::mask_cache> masks_;
  std::shared_ptr<const grammar::vocab_trie> trie_;
  std::shared_ptr<const std::vector<std::string>> pieces_;
  std::optional<grammar::distinct_items> distinct_;
  std::vector<int32_t> blocked_;
  bool dead_end_ = false;
};

class grammar_spec final : public constraint_spec {
 public:
  grammar_spec(std::shared_ptr<const grammar::grammar> g, std::shared_ptr<const grammar::vocab_trie> trie,
               std::shared_ptr<const std::vector<std::string>> pieces)
      : g_(std::move(g)), trie_(trie), masks_(std::make_shared<grammar::mask_cache>(g_, std::move(trie))), pieces_(std::move(pieces)) {}
  std::unique_ptr<token_constraint> start() const override {
    return std::make_unique<grammar_constraint>(g_, masks_, trie_, pieces_);
  }
  const grammar::grammar& rules() const { return *g_; }

 private:
  std::shared_ptr<const grammar::grammar> g_;
  std::shared_ptr<const grammar::vocab_trie> trie_;
  std::shared_ptr<grammar::mask_cache> masks_;  // shared by every request on this grammar
  std::shared_ptr<const std::vector<std::string>> pieces_;
};

grammar::grammar choice_grammar(const std::vector<std::string>& choices) {
  grammar::grammar_builder b;
  std::vector<grammar::alternative> alts;
  alts.reserve(choices.size());
  for (const std::string& c : choices) alts.push_back(grammar::grammar_builder::literal(c));
  return b.finish(b.add_rule("root", std::move(alts)));
}

const char* what_of(kind k) {
  switch (k) {
    case kind::json_object: return "JSON object constraint";
    case kind::json_schema: return "JSON schema";
    case kind::regex: return "regular expression";
    case kind::choice: return "choice list";
    case kind::grammar: return "grammar";
    case kind::tool_calls: return "tool";
    case kind::none: break;
  }
  return "constraint";
}

}  // namespace

std::string constraint_key(const output_constraint& c) {
  std::string key(1, static_cast<char>('0' + static_cast<int>(c.type)));
  switch (c.type) {
    case kind::json_schema:
    case kind::tool_calls: key += boost::json::serialize(c.schema); break;
    case kind::regex:
    case kind::grammar: key += c.text; break;
    case kind::choice:
      for (const std::string& s : c.choices) key += std::to_string(s.size()) + ":" + s;
      break;
    case kind::json_object:
    case kind::none: break;
  }
  return key;
}

constraint_compiler::constraint_compiler(const tokenizer& tok, bool compact_json) : compact_json_(compact_json) {
  auto pieces = std::make_shared<std::vector<std::string>>(static_cast<size_t>(tok.n_vocab()));
  for (int32_t id = 0; id < tok.n_vocab(); ++id) (*pieces)[static_cast<size_t>(id)] = tok.token_to_piece(id, false);
  trie_ = std::make_shared<const grammar::vocab_trie>(*pieces);
  pieces_ = std::move(pieces);
}

constraint_compiler::~constraint_compiler() = default;

std::shared_ptr<const grammar::grammar> constraint_compiler::build(const output_constraint& c, const grammar::grammar* answer) const {
  switch (c.type) {
    case kind::grammar: return std::make_shared<const grammar::grammar>(grammar::parse_gbnf(c.text));
    case kind::choice: return std::make_shared<const grammar::grammar>(choice_grammar(c.choices));
    case kind::json_object: return std::make_shared<const grammar::grammar>(grammar::compile_json_object(compact_json_));
    case kind::json_schema: return std::make_shared<const grammar::grammar>(grammar::compile_json_schema(c.schema, compact_json_));
    case kind::regex: return std::make_shared<const grammar::grammar>(grammar::compile_regex(c.text));
    case kind::tool_calls: return std::make_shared<const grammar::grammar>(build_tool_grammar(c.schema, answer, compact_json_));
    case kind::none: break;
  }
  throw grammar::grammar_error("no constraint");
}

std::shared_ptr<const constraint_spec> constraint_compiler::compile(const output_constraint& c, std::optional<api_error>& err) {
  err.reset();
  if (c.none()) return nullptr;
  const std::string key = constraint_key(c);
  if (key.size() > grammar::k_max_schema_bytes + 1) {
    api_error a;
    a.param = c.param;
    a.message = std::string("the ") + what_of(c.type) + " in '" + c.param + "' is larger than " +
                std::to_string(grammar::k_max_schema_bytes) + " bytes";
    err = std::move(a);
    return nullptr;
  }
  {
    std::lock_guard lock(mu_);
    if (const auto it = cache_.find(key); it != cache_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.second);
      ++stats_.n_cache_hits;
      return it->second.first;
    }
  }
  // Tools with a response format under "auto": the format compiles on its
  // own first (cached; its errors name its own field), then is embedded.
  std::shared_ptr<const constraint_spec> answer;
  if (c.type == kind::tool_calls && !c.schema.at("answer").is_null()) {
    answer = compile(answer_of(c.schema.at("answer")), err);
    if (err) return nullptr;
  }
  std::shared_ptr<const constraint_spec> spec;
  try {
    const auto* a = dynamic_cast<const grammar_spec*>(answer.get());
    spec = std::make_shared<grammar_spec>(build(c, a ? &a->rules() : nullptr), trie_, pieces_);
  } catch (const grammar::grammar_error& e) {
    api_error a;
    a.param = c.param;
    a.message = std::string("invalid ") + what_of(c.type) + " in '" + c.param + "': " + e.what();
    err = std::move(a);
    return nullptr;
  }
  std::lock_guard lock(mu_);
  ++stats_.n_compiled;
  if (cache_.count(key) == 0) {
    lru_.push_front(key);
    cache_.emplace(key, std::make_pair(spec, lru_.begin()));
    if (cache_.size() > k_max_cached_grammars) {
      cache_.erase(lru_.back());
      lru_.pop_back();
    }
  }
  return spec;
}

constraint_compiler::counters constraint_compiler::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace spate::api
