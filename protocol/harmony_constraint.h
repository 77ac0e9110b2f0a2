// Constrained decoding of harmony output (gpt-oss, harmony.h): the grammars
// apply to the text of one message, never to the headers or the reasoning
// around it, as reasoning_constraint.h does after "</think>":
//   answer   a structured output (response format) constrains the text of
//            the first final message, from the token after
//            "<|channel|>final<|message|>";
//   calls    each function's parameters schema constrains the text of a
//            message to functions.NAME (the call's arguments);
//   headers  while a header is written, a recipient must spell
//            "functions.NAME" of an allowed function (at most 64; more: any),
//            and with call_required (tool_choice required or named) its
//            channel may not be final;
//   ending   with call_required, the output may not end before a call has
//            begun; inside a constrained text, when its grammar allows;
//   budget   (thinking_token_budget) once the text of analysis messages has
//            taken that many tokens (and ends on a whole UTF-8 character),
//            the open analysis message is closed by forcing the tokens of
//            "<|end|><|start|>assistant<|channel|>final<|message|>": the
//            answer follows in a final message. 0 closes an analysis message
//            as soon as it opens. A later analysis message is closed the
//            same way at once.
// Inside a constrained text the harmony marker tokens ("<|end|>"...) are
// masked (their text would pass a JSON string); "<|return|>" and "<|call|>"
// end the generation and come when the grammar can end. Everything else is
// free: the model chooses its channels.
//
// The constraint follows the output with the same harmony_stream the
// formatters use (over the tokens' text), so both agree on where a message
// starts. A grammar starts at a token boundary: a text token that spells
// "<|message|>" and more would leave those bytes unchecked (the marker is one
// token in gpt-oss's vocabulary, so this does not arise).
//
// Thread-safety: a harmony_vocab is immutable after construction and shared;
// each token_constraint is used as engine_api.h says. The inner specs'
// start() run inside accept() (see reasoning_constraint.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine_api.h"
#include "protocol/harmony.h"

namespace spate {
class tokenizer;
}

namespace spate::api {

// What the constraints need to know of the vocabulary: built once per model.
class harmony_vocab {
 public:
  explicit harmony_vocab(const tokenizer& tok);

  const std::vector<std::string>& pieces() const { return pieces_; }
  // Tokens whose text is one of harmony's markers (sorted).
  const std::vector<int32_t>& marker_tokens() const { return markers_; }
  // "<|start|>", "<|channel|>", "<|message|>" and "<|end|>" are each one
  // token whose text spells it: false when one is a control token whose text
  // never reaches the output, or is not a token at all (no parser can see it).
  bool markers_are_text() const { return markers_are_text_; }
  // The tokens of "<|end|><|start|>assistant<|channel|>final<|message|>"
  // (special-token text parsed), which a spent reasoning budget forces.
  const std::vector<int32_t>& close_tokens() const { return close_tokens_; }

 private:
  std::vector<std::string> pieces_;
  std::vector<int32_t> close_tokens_;
  std::vector<int32_t> markers_;
  bool markers_are_text_ = false;
};

struct harmony_constraints {
  std::shared_ptr<const constraint_spec> answer;  // the final message's text, or null
  // Function name -> the grammar of its arguments (null: any text).
  std::vector<std::pair<std::string, std::shared_ptr<const constraint_spec>>> calls;
  bool call_required = false;
  // thinking_token_budget: the most tokens the analysis messages' text may take.
  std::optional<int32_t> reasoning_budget;
};

// The constraint of one request whose output is harmony read with start
// (messages to functions.NAME are calls when c.calls is not empty).
std::shared_ptr<const constraint_spec> make_harmony_constraint(harmony_constraints c, harmony_options start,
                                                               std::shared_ptr<const harmony_vocab> vocab);

}  // namespace spate::api
