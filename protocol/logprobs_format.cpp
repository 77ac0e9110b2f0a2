#include "protocol/logprobs_format.h"
#include "util/utf8.h"

#include <cmath>

namespace spate {

namespace json = boost::json;

namespace {

double finite(float lp) { return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0; }

std::string piece(const tokenizer& tok, int32_t id) {
  try {
    return tok.token_to_piece(id, /*special=*/true);
  } catch (const std::exception&) {
    return "";
  }
}

json::array bytes_of(const std::string& raw) {
  json::array a;
  for (unsigned char c : raw) a.push_back(static_cast<int64_t>(c));
  return a;
}

}  // namespace

json::object completion_logprobs(const tokenizer& tok, const std::vector<token_logprob>& lps, int64_t& text_offset) {
  json::array tokens, token_lps, tops, offsets;
  for (const auto& lp : lps) {
    const std::string text = utf8::sanitize(piece(tok, lp.token));
    tokens.push_back(json::string(text));
    token_lps.push_back(finite(lp.logprob));
    json::object top;
    for (const auto& [id, v] : lp.top) top[utf8::sanitize(piece(tok, id))] = finite(v);
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += static_cast<int64_t>(text.size());
  }
  json::object o;
  o["tokens"] = std::move(tokens);
  o["token_logprobs"] = std::move(token_lps);
  o["top_logprobs"] = std::move(tops);
  o["text_offset"] = std::move(offsets);
  return o;
}

json::object chat_logprobs(const tokenizer& tok, const std::vector<token_logprob>& lps) {
  json::array content;
  for (const auto& lp : lps) {
    const std::string raw = piece(tok, lp.token);
    json::object e;
    e["token"] = utf8::sanitize(raw);
    e["logprob"] = finite(lp.logprob);
    e["bytes"] = bytes_of(raw);
    json::array top;
    for (const auto& [id, v] : lp.top) {
      const std::string r = piece(tok, id);
      json::object t;
      t["token"] = utf8::sanitize(r);
      t["logprob"] = finite(v);
      t["bytes"] = bytes_of(r);
      top.push_back(std::move(t));
    }
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  json::object o;
  o["content"] = std::move(content);
  return o;
}

}  // namespace spate
