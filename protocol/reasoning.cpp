#include "protocol/reasoning.h"

#include "jinja/chat_template.h"

namespace spate::api {

namespace json = boost::json;

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view rstrip(std::string_view s) {
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<reasoning_parser> reasoning_parser_from_name(std::string_view name) {
  if (name == "none") return reasoning_parser::none;
  if (name == "qwen3") return reasoning_parser::qwen3;
  if (name == "deepseek_r1") return reasoning_parser::deepseek_r1;
  if (name == "openai_gptoss") return reasoning_parser::openai_gptoss;
  return std::nullopt;
}

const char* reasoning_parser_name(reasoning_parser p) {
  switch (p) {
    case reasoning_parser::qwen3: return "qwen3";
    case reasoning_parser::deepseek_r1: return "deepseek_r1";
    case reasoning_parser::openai_gptoss: return "openai_gptoss";
    case reasoning_parser::none: break;
  }
  return "none";
}

reasoning_parser detect_reasoning_parser(const chat_template& tmpl, std::string* reason) {
  const auto say = [reason](const char* why) {
    if (reason) *reason = why;
  };
  if (tmpl.source().find("<|channel|>") != std::string::npos) {
    say("the chat template writes harmony channels (<|channel|>)");
    return reasoning_parser::openai_gptoss;
  }
  if (tmpl.source().find(k_think_open) == std::string::npos) {
    say("the chat template does not write <think>");
    return reasoning_parser::none;
  }
  try {
    json::array messages{json::object{{"role", "user"}, {"content", "Hi"}}};
    chat_template_options o;
    o.add_generation_prompt = true;
    o.now_unix_s = 0;
    const std::string prompt = tmpl.render(messages, o);
    if (rstrip(prompt).ends_with(k_think_open)) {
      say("the chat template opens <think> in its generation prompt");
      return reasoning_parser::deepseek_r1;
    }
    say("the chat template writes <think>; the model opens it");
  } catch (const std::exception&) {
    say("the chat template writes <think> (its generation prompt did not render for a test message)");
  }
  return reasoning_parser::qwen3;
}

reasoning_start reasoning_start_of(reasoning_parser p, std::string_view prompt_text, const json::object& template_extra,
                                   const std::string* continued_message) {
  if (continued_message) {
    // The model continues this message: an unclosed <think> in it is reasoning in progress.
    const size_t open = continued_message->rfind(k_think_open);
    if (open == std::string::npos) return reasoning_start::content;
    return continued_message->find(k_think_close, open) == std::string::npos ? reasoning_start::reasoning : reasoning_start::content;
  }
  const std::string_view tail = rstrip(prompt_text);
  if (tail.ends_with(k_think_open)) return reasoning_start::reasoning;
  if (tail.ends_with(k_think_close)) return reasoning_start::content;
  if (p == reasoning_parser::qwen3) {
    if (const json::value* v = template_extra.if_contains("enable_thinking"); v && v->is_bool() && !v->get_bool())
      return reasoning_start::content;
    return reasoning_start::optional;
  }
  return reasoning_start::reasoning;
}

reasoning_splitter::reasoning_splitter(reasoning_start start)
    : start_(start),
      state_(start == reasoning_start::content ? state::content : state::lead_in),
      has_reasoning_(start == reasoning_start::reasoning) {}

void reasoning_splitter::feed(std::string_view text, reasoning_split* out) {
  if (state_ == state::lead_in) {
    feed_lead_in(text, out);
  } else if (state_ == state::reasoning) {
    feed_reasoning(text, out);
  } else if (out) {
    out->content.append(text);
  }
}

// Whitespace, then "<think>" byte by byte; the first byte that fits neither
// ends the lead-in: the held bytes are then ordinary output (content for an
// optional start, reasoning otherwise, where they may begin a "</think>").
void reasoning_splitter::feed_lead_in(std::string_view text, reasoning_split* out) {
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const size_t n_space = held_.size() - open_matched_;
    if (open_matched_ == 0 && is_space(c) && n_space < k_max_lead_in_whitespace) {
      held_.push_back(c);
      continue;
    }
    if (c == k_think_open[open_matched_]) {
      held_.push_back(c);
      if (++open_matched_ == k_think_open.size()) {
        held_.clear();  // the whitespace and the tag are dropped
        open_matched_ = 0;
        has_reasoning_ = true;
        state_ = state::reasoning;
        feed_reasoning(text.substr(i + 1), out);
        return;
      }
      continue;
    }
    std::string held = std::move(held_);
    held_.clear();
    open_matched_ = 0;
    if (start_ == reasoning_start::optional) {
      state_ = state::content;
      if (out) {
        out->content += held;
        out->content.append(text.substr(i));
      }
      return;
    }
    state_ = state::reasoning;
    held.append(text.substr(i));
    feed_reasoning(held, out);
    return;
  }
}

// held_ is the longest suffix of the reasoning that is a proper prefix of
// "</think>". '<' occurs in the tag only at its start, so after a mismatch the
// match can only restart at the mismatching byte itself.
void reasoning_splitter::feed_reasoning(std::string_view text, reasoning_split* out) {
  size_t i = 0;
  while (i < text.size()) {
    if (held_.empty()) {
      const size_t lt = text.find('<', i);
      if (out) out->reasoning.append(text.substr(i, lt == std::string_view::npos ? std::string_view::npos : lt - i));
      if (lt == std::string_view::npos) return;
      held_.push_back('<');
      i = lt + 1;
      continue;
    }
    const char c = text[i];
    if (c == k_think_close[held_.size()]) {
      held_.push_back(c);
      ++i;
      if (held_.size() == k_think_close.size()) {
        held_.clear();
        state_ = state::content;
        if (out) out->content.append(text.substr(i));
        return;
      }
      continue;
    }
    if (out) out->reasoning += held_;
    held_.clear();  // c is looked at again, from an empty match
  }
}

void reasoning_splitter::finish(reasoning_split* out) {
  if (out && !held_.empty()) {
    const bool content = state_ == state::lead_in && start_ == reasoning_start::optional;
    (content ? out->content : out->reasoning) += held_;
  }
  held_.clear();
  open_matched_ = 0;
  if (state_ == state::lead_in) {
    state_ = start_ == reasoning_start::optional ? state::content : state::reasoning;
  }
}

reasoning_split split_reasoning(reasoning_start start, std::string_view text, bool* has_reasoning) {
  reasoning_splitter s(start);
  reasoning_split out;
  s.feed(text, &out);
  s.finish(&out);
  if (has_reasoning) *has_reasoning = s.has_reasoning();
  return out;
}

}  // namespace spate::api
