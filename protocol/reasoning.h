// Reasoning output: splitting a model's <think>...</think> reasoning from its
// answer, as vLLM's --reasoning-parser and llama-server's reasoning_content do.
//
// Parsers (vLLM's names):
//   deepseek_r1  the output is reasoning until "</think>" (an optional
//                leading "<think>" is dropped), also when no "<think>" was
//                generated: DeepSeek-R1's templates open the block in the
//                prompt. No "</think>" at all: everything is reasoning.
//   qwen3        reasoning only when the output starts with "<think>" (after
//                whitespace, which is then dropped) or the prompt left a
//                think block open; otherwise the output is content. As
//                vLLM's qwen3: chat_template_kwargs {"enable_thinking":
//                false} makes the whole output content.
//   openai_gptoss  harmony (gpt-oss): the analysis channel is the reasoning;
//                read by the harmony parser (harmony.h), not by the splitter
//                below, which serves the two think-tag parsers.
// Both think-tag parsers: a prompt that ends (but for whitespace) with "<think>" starts the
// output inside the reasoning; one that ends with "</think>" (Qwen3's
// enable_thinking=false writes "<think>\n\n</think>\n\n") starts it in the
// content. With continue_final_message the final assistant message decides:
// an unclosed "<think>" in it means reasoning, anything else content.
// Everything after the first "</think>" of the reasoning is content, byte for
// byte (a second "<think>" there is content too). The tags are matched in the
// text, so they must be text (not control tokens that detokenize to "").
//
// The splitter is incremental: fed the output in pieces of any size (split
// inside a tag, one byte at a time...), it returns the same reasoning and
// content as fed the whole text at once, and never lets a partial tag out:
// text that may still become "<think>" or "</think>" is held back until it
// either does or cannot. Whitespace before a leading "<think>" counts for at
// most k_max_lead_in_whitespace bytes.
//
// Thread-safety: free functions are pure; a reasoning_splitter is used by one
// thread at a time.
#pragma once

#include <boost/json.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace spate {
class chat_template;
}

namespace spate::api {

enum class reasoning_parser { none, qwen3, deepseek_r1, openai_gptoss };

// "none", "qwen3", "deepseek_r1", "openai_gptoss" (case-sensitive), else nullopt.
std::optional<reasoning_parser> reasoning_parser_from_name(std::string_view name);
const char* reasoning_parser_name(reasoning_parser p);
// The names --reasoning-parser takes, for error messages.
inline constexpr std::string_view k_reasoning_parser_names = "qwen3, deepseek_r1, openai_gptoss, none";

inline constexpr std::string_view k_think_open = "<think>";
inline constexpr std::string_view k_think_close = "</think>";
inline constexpr size_t k_max_lead_in_whitespace = 64;

// The parser a chat template calls for: openai_gptoss when its source contains
// "<|channel|>" (harmony); else none when it does not contain "<think>"; else
// deepseek_r1 when its generation prompt (rendered for one user message) ends
// with "<think>", qwen3 otherwise (also when it does not render). reason: a
// few words for the start-up log.
reasoning_parser detect_reasoning_parser(const chat_template& tmpl, std::string* reason = nullptr);

// Where the output of one request starts.
enum class reasoning_start {
  reasoning,  // inside the reasoning (a leading "<think>" is dropped)
  content,    // in the content: the whole output is content
  optional,   // reasoning only if the output starts with "<think>"
};

// The start for parser p (qwen3 or deepseek_r1) given the rendered prompt, the template
// variables (enable_thinking) and, with continue_final_message, the text of
// the final assistant message (else nullptr).
reasoning_start reasoning_start_of(reasoning_parser p, std::string_view prompt_text, const boost::json::object& template_extra,
                                   const std::string* continued_message);

// Pieces of output, split.
struct reasoning_split {
  std::string reasoning;
  std::string content;
};

class reasoning_splitter {
 public:
  enum class state {
    lead_in,    // at the start: whitespace and a prefix of "<think>" held back
    reasoning,  // in the reasoning: a prefix of "</think>" may be held back
    content,    // past the reasoning (or never in it)
  };

  explicit reasoning_splitter(reasoning_start start);

  // Feeds the next piece of output; appends what is now certain to out (null:
  // only the state moves on).
  void feed(std::string_view text, reasoning_split* out);
  // The end of the output: appends what was held back (an incomplete tag is
  // text) to out. The splitter is then in its final state; do not feed again.
  void finish(reasoning_split* out);

  state current() const { return state_; }
  // The output has (so far) a reasoning part, perhaps empty: the start was
  // reasoning, or a leading "<think>" came. Never goes back to false.
  bool has_reasoning() const { return has_reasoning_; }
  // Bytes of "</think>" matched at the end of the reasoning so far, [0, 7].
  size_t close_matched() const { return state_ == state::reasoning ? held_.size() : 0; }

 private:
  void feed_lead_in(std::string_view text, reasoning_split* out);
  void feed_reasoning(std::string_view text, reasoning_split* out);

  reasoning_start start_;
  state state_;
  bool has_reasoning_;
  // lead_in: whitespace then open_matched_ bytes of "<think>"; reasoning: a
  // proper prefix of "</think>". At most k_max_lead_in_whitespace + 7 bytes.
  std::string held_;
  size_t open_matched_ = 0;
};

// The whole output at once: the same result as feeding it and finishing.
// has_reasoning receives the splitter's has_reasoning().
reasoning_split split_reasoning(reasoning_start start, std::string_view text, bool* has_reasoning = nullptr);

}  // namespace spate::api
