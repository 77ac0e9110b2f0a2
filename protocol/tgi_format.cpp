#include "protocol/tgi_format.h"

#include <cmath>

#include "util/utf8.h"

namespace spate {

namespace json = boost::json;

namespace {

double finite(float lp) { return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0; }

std::string piece(const tokenizer& tok, int32_t id, bool special) {
  try {
    return tok.token_to_piece(id, special);
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace

const char* tgi_finish_reason(finish_reason r, int32_t stop_index) {
  if (r == finish_reason::length) return "length";
  if (r == finish_reason::stop && stop_index >= 0) return "stop_sequence";
  return "eos_token";
}

tgi_formatter::tgi_formatter(const api::served_model& m, const api::tgi_request& r, const prepared_generation& g)
    : model_(m), req_(r), gen_(g), decoder_(*m.tok, /*skip_special=*/true) {}

json::object tgi_formatter::token_json(int32_t id, float logprob, std::string text) const {
  const tokenizer& tok = *model_.tok;
  // Special: ends generation, or has text only when special tokens are rendered (control tokens).
  const bool special = tok.is_eog(id) || (piece(tok, id, false).empty() && !piece(tok, id, true).empty());
  return json::object{{"id", id}, {"text", std::move(text)}, {"logprob", finite(logprob)}, {"special", special}};
}

tgi_formatter::token_out tgi_formatter::make_token(int32_t id, const token_logprob* lp, std::string text) const {
  token_out t;
  t.token = token_json(id, lp ? lp->logprob : 0.0f, std::move(text));
  if (!lp) t.token["logprob"] = nullptr;
  if (lp && req_.top_n_tokens > 0) {
    for (const auto& [alt, v] : lp->top) t.top.push_back(token_json(alt, v, utf8::sanitize(piece(*model_.tok, alt, false))));
  }
  return t;
}

std::string tgi_formatter::generated_text() const { return req_.return_full_text ? req_.inputs + acc_.text : acc_.text; }

stream_event tgi_formatter::stream_chunk(token_out t, bool last) const {
  json::object o;
  o["index"] = 0;
  o["token"] = std::move(t.token);
  o["top_tokens"] = std::move(t.top);
  o["generated_text"] = last ? json::value(generated_text()) : json::value(nullptr);
  json::value details = nullptr;
  if (last && req_.details) {
    json::object d;
    d["finish_reason"] = tgi_finish_reason(acc_.reason, stop_index_);
    d["generated_tokens"] = static_cast<int64_t>(acc_.token_ids.size());
    d["seed"] = req_.sampling && gen_.params.seed ? json::value(*gen_.params.seed) : json::value(nullptr);
    d["input_length"] = static_cast<int64_t>(gen_.prompt.size());
    details = std::move(d);
  }
  o["details"] = std::move(details);
  return {"", json::serialize(o)};
}

stream_events tgi_formatter::on_event(int32_t, const engine_event& e) {
  stream_events out;
  acc_.add(e);
  switch (e.type) {
    case engine_event::kind::tokens:
      for (size_t i = 0; i < e.token_ids.size(); ++i) {
        const int32_t id = e.token_ids[i];
        std::string text;
        try {
          text = decoder_.push(id);
        } catch (const std::exception&) {
        }
        token_out t = make_token(id, i < e.logprobs.size() ? &e.logprobs[i] : nullptr, std::move(text));
        if (!req_.stream) {
          tokens_.push_back(std::move(t));
          continue;
        }
        if (pending_) out.push_back(stream_chunk(std::move(*pending_), false));
        pending_ = std::move(t);
      }
      break;
    case engine_event::kind::finished: {
      stop_index_ = e.stop_index;
      const std::string tail = decoder_.flush();
      token_out* last = req_.stream ? (pending_ ? &*pending_ : nullptr) : (tokens_.empty() ? nullptr : &tokens_.back());
      if (last && !tail.empty()) last->token["text"] = std::string(last->token["text"].as_string()) + tail;
      if (req_.stream) {
        // No token at all (the request was aborted before one): the end still carries the text and details.
        if (!pending_) pending_ = token_out{token_json(model_.tok->eos_id() >= 0 ? model_.tok->eos_id() : 0, 0.0f, ""), {}};
        out.push_back(stream_chunk(std::move(*pending_), true));
        pending_.reset();
      }
      break;
    }
    case engine_event::kind::error:
      if (req_.stream) {
        out.push_back({"", api::tgi_error_body(api::tgi_error{500, acc_.error, "generation"})});
      }
      break;
  }
  return out;
}

final_body tgi_formatter::result() const {
  final_body b;
  if (!acc_.error.empty()) {
    b.ok = false;
    b.error = acc_.error;
    return b;
  }
  json::object o;
  o["generated_text"] = generated_text();
  if (req_.details) {
    json::array tokens, top;
    for (const token_out& t : tokens_) {
      tokens.push_back(t.token);
      top.push_back(t.top);
    }
    json::object d;
    d["finish_reason"] = tgi_finish_reason(acc_.reason, stop_index_);
    d["generated_tokens"] = static_cast<int64_t>(acc_.token_ids.size());
    d["seed"] = req_.sampling && gen_.params.seed ? json::value(*gen_.params.seed) : json::value(nullptr);
    d["prefill"] = json::array{};
    d["tokens"] = std::move(tokens);
    if (req_.top_n_tokens > 0) d["top_tokens"] = std::move(top);
    o["details"] = std::move(d);
  }
  if (req_.wrap_in_array) {
    json::array a;
    a.push_back(std::move(o));
    b.body = json::serialize(a);
  } else {
    b.body = json::serialize(o);
  }
  return b;
}

std::string tgi_formatter::finish_reason_text() const {
  if (!acc_.error.empty()) return "error";
  return acc_.done ? openai_finish_reason(acc_.reason) : "";
}

json::object tgi_info(const api::served_model& m, int32_t max_concurrent_requests, std::string_view version) {
  json::object o;
  o["model_id"] = m.name;
  o["model_sha"] = nullptr;
  o["model_dtype"] = "gguf";
  o["model_device_type"] = "cpu";
  o["model_pipeline_tag"] = "text-generation";
  o["max_concurrent_requests"] = max_concurrent_requests;
  o["max_best_of"] = 1;
  o["max_stop_sequences"] = api::k_tgi_max_stop_sequences;
  o["max_input_tokens"] = m.max_model_len - 1;
  o["max_input_length"] = m.max_model_len - 1;  // TGI 1.x's name of max_input_tokens
  o["max_total_tokens"] = m.max_model_len;
  o["max_top_n_tokens"] = api::k_tgi_max_top_n_tokens;
  o["validation_workers"] = 1;
  o["max_client_batch_size"] = 1;
  o["router"] = "spate";
  o["version"] = version;
  o["sha"] = nullptr;
  o["docker_label"] = nullptr;
  return o;
}

}  // namespace spate
