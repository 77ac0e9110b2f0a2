// Constrained decoding with a reasoning parser: structured outputs and tool
// grammars constrain the content only, never the reasoning before it (as in
// vLLM), and thinking_token_budget ends the reasoning by forcing "</think>".
//
// The constraint follows the output token by token with the same
// reasoning_splitter the response formatters use (over the tokens' bytes), so
// the two agree on where the reasoning ends:
//   reasoning   every token is allowed (end-of-generation too), except, when
//               there is a grammar, tokens that would finish "</think>" and
//               carry content bytes in the same token: the grammar starts at
//               a token boundary, right after the tag, and sees every byte of
//               the content.
//   forcing     the budget is spent (and the text ends on a whole UTF-8
//               character): only the next token of "</think>" is allowed.
//   content     the grammar (started afresh) constrains the rest; without
//               one, nothing does.
//   optional    (qwen3 lead-in: "<think>" may or may not come) the grammar's
//               tokens are allowed, and so are tokens that keep "<think>"
//               possible. A token only the latter allow commits the output to
//               reasoning; once a token the grammar allows takes the output
//               out of the lead-in, it is content the grammar has seen whole.
// The budget counts the tokens accepted in the reasoning (the lead-in of a
// reasoning start included); 0 forces "</think>" at once.
//
// Thread-safety: a reasoning_vocab is immutable after construction and
// shared; each token_constraint is used as engine_api.h says (one thread at
// a time). The inner spec's start() runs inside accept() when the content
// begins, on whichever thread runs the constraint: it must be safe from any
// thread (the constraint compiler's specs only share immutable grammars and a
// locking mask cache).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_api.h"
#include "protocol/reasoning.h"

namespace spate {
class tokenizer;
}

namespace spate::api {

// What the constraints need to know of the vocabulary: built once per model.
class reasoning_vocab {
 public:
  // Reads every token's bytes (control tokens have none) and tokenizes "</think>".
  explicit reasoning_vocab(const tokenizer& tok);

  const std::vector<std::string>& pieces() const { return pieces_; }
  // The tokens of "</think>" (special-token text parsed: one id where it is a token).
  const std::vector<int32_t>& close_tokens() const { return close_tokens_; }
  // Tokens that finish "</think>" with bytes after it, when the reasoning ends
  // with m bytes of the tag (m in [0, 7]).
  const std::vector<int32_t>& straddling(size_t m) const { return straddling_[m]; }
  // Tokens that can finish "</think>" at all (their bytes contain '>').
  const std::vector<int32_t>& closing_candidates() const { return closing_; }
  // Tokens that can keep a lead-in going or open the reasoning from some
  // lead-in state (whitespace, prefixes of "<think>", pieces starting with it).
  const std::vector<int32_t>& lead_in_candidates() const { return lead_in_; }
  // "<think>" and "</think>" tokenize to tokens whose text spells them: false
  // when one is a control token (its text never reaches the output, so no
  // parser can see it).
  bool tags_are_text() const { return tags_are_text_; }

 private:
  std::vector<std::string> pieces_;
  std::vector<int32_t> close_tokens_;
  std::array<std::vector<int32_t>, 8> straddling_;
  std::vector<int32_t> closing_;
  std::vector<int32_t> lead_in_;
  bool tags_are_text_ = false;
};

// The constraint of one request: inner (may be null: no grammar) applies to
// the content; budget (may be empty) bounds the reasoning. Requires a start
// other than content (there is no reasoning to follow then).
std::shared_ptr<const constraint_spec> make_reasoning_constraint(std::shared_ptr<const constraint_spec> inner, reasoning_start start,
                                                                 std::shared_ptr<const reasoning_vocab> vocab,
                                                                 std::optional<int32_t> budget);

}  // namespace spate::api
