// Structured outputs, compiled: from a request's output_constraint to the
// engine's constraint_spec (engine_api.h), through the grammar engine
// (grammar/): JSON Schema, regex, choices and GBNF become one byte-level
// grammar; a matcher over it, with token masks from a per-grammar mask_cache
// over the model's vocabulary trie, is each request's token_constraint.
//
// Compiled grammars are cached by (kind, source): the same schema twice
// compiles once, and later requests with it also share its mask cache. At
// most k_max_cached_grammars are kept (least recently used dropped first);
// each mask cache is bounded by grammar::k_max_mask_bytes, so all masks
// together stay under k_max_cached_grammars * 16 MiB.
//
// Thread-safety: compile() may be called from any thread (the cache has its
// own mutex); specs are immutable and shared; each token_constraint is used by
// the engine thread only. Masks are computed there (the executor side), never
// on the I/O threads: compile() builds only the grammar.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_api.h"
#include "protocol/output_constraint.h"

namespace spate {

class tokenizer;

namespace grammar {
struct grammar;
class vocab_trie;
class mask_cache;
}  // namespace grammar

namespace api {

struct api_error;

inline constexpr size_t k_max_cached_grammars = 16;

class constraint_compiler {
 public:
  // Builds the vocabulary trie from the tokenizer's token bytes (control
  // tokens have none and are never allowed by a grammar).
  // compact_json: JSON grammars without whitespace (--json-whitespace compact).
  explicit constraint_compiler(const tokenizer& tok, bool compact_json = false);
  ~constraint_compiler();

  // The spec for c (null when c is none), or a 400 naming c.param and saying
  // what is wrong and where. Cached.
  std::shared_ptr<const constraint_spec> compile(const output_constraint& c, std::optional<api_error>& err);

  struct counters {
    int64_t n_compiled = 0, n_cache_hits = 0;
  };
  counters stats() const;

 private:
  struct entry;
  // answer: the compiled response format a tool grammar embeds (or null).
  std::shared_ptr<const grammar::grammar> build(const output_constraint& c, const grammar::grammar* answer) const;

  std::shared_ptr<const std::vector<std::string>> pieces_;  // token id -> bytes
  bool compact_json_ = false;
  std::shared_ptr<const grammar::vocab_trie> trie_;
  mutable std::mutex mu_;
  std::list<std::string> lru_;  // keys, most recent first
  std::unordered_map<std::string, std::pair<std::shared_ptr<const constraint_spec>, std::list<std::string>::iterator>> cache_;
  counters stats_;
};

// The cache key of a constraint: its kind and canonical source.
std::string constraint_key(const output_constraint& c);

}  // namespace api
}  // namespace spate
