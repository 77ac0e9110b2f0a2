// The part of every generating endpoint that is independent of the transport:
// from a parsed OpenAI request to token ids and validated sampling parameters
// (chat template, tokenizer, max_tokens default, context check).
//
// Thread-safety: any thread (uses only const model data).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/openai_request.h"
#include "protocol/output_parser.h"
#include "protocol/served_model.h"

namespace spate {

class tokenizer;

struct prepared_generation {
  std::vector<int32_t> prompt;      // token ids
  std::string prompt_text;          // the rendered / given prompt text (echo, logs)
  sampling_params params;           // validated, max_tokens set
  int32_t n = 1;
  // Completions with a list of prompts: the prompts after the first. Choice
  // c (0 <= c < n_choices()) generates from prompt c / n, as its sample c % n.
  struct extra_prompt {
    std::vector<int32_t> ids;
    std::string text;
  };
  std::vector<extra_prompt> more_prompts;

  int32_t n_prompts() const { return 1 + static_cast<int32_t>(more_prompts.size()); }
  int32_t n_choices() const { return n_prompts() * n; }
  const std::vector<int32_t>& prompt_of_choice(int32_t c) const {
    const int32_t p = c / n;
    return p == 0 ? prompt : more_prompts[static_cast<size_t>(p - 1)].ids;
  }
  const std::string& prompt_text_of_choice(int32_t c) const {
    const int32_t p = c / n;
    return p == 0 ? prompt_text : more_prompts[static_cast<size_t>(p - 1)].text;
  }
  // Prompt tokens of every prompt (usage.prompt_tokens counts each once).
  int32_t n_prompt_tokens() const {
    size_t t = prompt.size();
    for (const auto& e : more_prompts) t += e.ids.size();
    return static_cast<int32_t>(t);
  }
  // Set when the request may call tools: the format to parse the output in.
  std::optional<api::tool_call_format> tool_format;
  // Chat and responses with a think-tag reasoning parser: where the output
  // starts (reasoning.h); the formatters split reasoning from content with it.
  std::optional<api::reasoning_start> reasoning;
  // Chat and responses whose output is harmony (harmony.h): the reasoning
  // parser is openai_gptoss, or the request uses tools in the openai format.
  // reasoning is then unset.
  std::optional<api::harmony_options> harmony;

  // How the formatters parse the output (output_parser.h).
  api::output_format output() const { return {reasoning, harmony, tool_format}; }
};

// The prompt and length checks every front end shares (the server through
// prepare_generation, `spate generate` per JSONL line); each front end words
// the outcome itself.
struct generation_check {
  enum class outcome {
    ok,
    empty_prompt,        // no prompt tokens
    token_out_of_range,  // bad_token is outside [0, n_vocab)
    no_room,             // n_prompt >= max_model_len: not even one token fits
    invalid_params,      // validate(params) failed: message
    too_long,            // n_prompt + max_tokens > max_model_len
  };
  outcome result = outcome::ok;
  int32_t n_prompt = 0;
  int32_t max_model_len = 0;
  int32_t n_vocab = 0;
  int32_t max_tokens = 0;  // the effective max_tokens (set from no_room on)
  int32_t bad_token = 0;
  std::string message;     // invalid_params: validate()'s text, naming the field first
  bool ok() const { return result == outcome::ok; }
};

// Checks prompt (non-empty, ids in [0, n_vocab)), that one token fits, sets
// params.max_tokens when empty to min(default_max_tokens, room) (or the whole
// room when default_max_tokens is empty), validates params, and that prompt +
// max_tokens fits max_model_len. Stops at the first failure, in that order.
generation_check check_generation(const std::vector<int32_t>& prompt, sampling_params& params,
                                  std::optional<int32_t> default_max_tokens, int32_t n_vocab, int32_t max_model_len);

// A text prompt's token ids as every front end tokenizes it: BOS/EOS as the
// model asks, special-token text parsed. Throws what the tokenizer throws.
std::vector<int32_t> encode_prompt(const tokenizer& tok, std::string_view text);

// Renders messages through the chat template (chat/responses) or tokenizes the
// prompt (completions), applies the max_tokens default (completions: 16 as in
// OpenAI/vLLM; chat/responses: what is left of --max-model-len) and checks the
// context (400 context_length_exceeded). With a reasoning parser (chat and
// responses) sets out.reasoning, and a structured output, tool grammar or
// thinking_token_budget becomes a reasoning constraint
// (reasoning_constraint.h): the grammar applies after the reasoning. Harmony
// output (out.harmony) instead gets a harmony constraint
// (harmony_constraint.h): a structured output applies to the final message,
// tool grammars to the calls' arguments; earlier reasoning in the messages
// (reasoning_content) goes to the template as "thinking". Returns the error
// or nullopt.
std::optional<api::api_error> prepare_generation(const api::served_model& m, const api::parsed_request& r, prepared_generation& out);

// Chat and responses: the prompt as prepare_generation renders it (the tool
// use's system prompt and message rewriting, harmony's, the chat template,
// continue_final_message), into out.prompt_text and out.prompt; sets
// out.tool_format, out.reasoning, out.harmony; a tool grammar replaces
// constraint. /tokenize renders chat messages through this too, so that its
// count is the chat's usage.prompt_tokens.
std::optional<api::api_error> render_chat_prompt(const api::served_model& m, const api::parsed_request& r, prepared_generation& out,
                                                 api::output_constraint& constraint);

// continue_final_message (vLLM's): cuts the rendered prompt right after the
// final assistant message's text, so the model continues it instead of
// starting a new turn. A 400 when the template did not render that text
// verbatim (or it is empty). Precondition: messages ends with an assistant message.
std::optional<api::api_error> cut_after_final_message(const boost::json::array& messages, std::string& prompt_text);

// "stop" / "length" (OpenAI finish_reason) for an engine finish reason; abort -> "abort".
std::string openai_finish_reason(finish_reason r);

}  // namespace spate
