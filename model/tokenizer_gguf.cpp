#include "model/tokenizer_gguf.h"

#include <cmath>
#include <stdexcept>

namespace spate {

namespace {

bool is_one_of(const std::string& s, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (s == n) return true;
  }
  return false;
}

}  // namespace

vocab_spec vocab_spec_from_gguf(const gguf_file& f) {
  vocab_spec v;
  auto model = f.get_string("tokenizer.ggml.model");
  if (!model) throw std::runtime_error("'" + f.path() + "': no tokenizer.ggml.model in the metadata");
  v.model = *model;
  v.pre = f.get_string("tokenizer.ggml.pre").value_or("");
  v.name = f.get_string("general.name").value_or("");

  const auto* toks = f.get_string_array("tokenizer.ggml.tokens");
  if (!toks) throw std::runtime_error("'" + f.path() + "': no tokenizer.ggml.tokens in the metadata");
  v.tokens = *toks;
  const auto n = static_cast<int64_t>(v.tokens.size());

  if (const gguf_value* s = f.find("tokenizer.ggml.scores")) {
    if (s->type != gguf_value_type::array || s->elem_type == gguf_value_type::string) {
      throw gguf_error("'" + f.path() + "': tokenizer.ggml.scores should be a numeric array");
    }
    v.scores.reserve(s->nums_.size());
    for (double d : s->nums_) v.scores.push_back(static_cast<float>(d));
  }
  if (const gguf_value* t = f.find("tokenizer.ggml.token_type")) {
    if (t->type != gguf_value_type::array || t->elem_type == gguf_value_type::string) {
      throw gguf_error("'" + f.path() + "': tokenizer.ggml.token_type should be a numeric array");
    }
    v.token_types.reserve(t->nums_.size());
    for (double d : t->nums_) {
      v.token_types.push_back(std::isfinite(d) && d >= 0 && d <= 255 ? static_cast<int32_t>(d) : 0);
    }
  }
  if (const auto* m = f.get_string_array("tokenizer.ggml.merges")) v.merges = *m;

  const bool spm = v.model == "llama";
  const bool bpe = v.model == "gpt2";
  if (spm) {
    v.bos_id = 1;
    v.eos_id = 2;
    v.unk_id = 0;
  } else if (bpe) {
    v.bos_id = 11;
    v.eos_id = 11;
    if (is_one_of(v.pre, {"glm4", "chatglm-bpe"})) v.bos_id = -1;
  }
  // A default outside a tiny vocabulary means "none".
  for (int32_t* id : {&v.bos_id, &v.eos_id, &v.unk_id}) {
    if (*id >= n) *id = -1;
  }
  auto read_id = [&](const char* key, int32_t& id) {
    if (auto x = f.get_int(key); x && *x >= 0 && *x < n) id = static_cast<int32_t>(*x);
  };
  read_id("tokenizer.ggml.bos_token_id", v.bos_id);
  read_id("tokenizer.ggml.eos_token_id", v.eos_id);
  read_id("tokenizer.ggml.eot_token_id", v.eot_id);
  read_id("tokenizer.ggml.unknown_token_id", v.unk_id);
  read_id("tokenizer.ggml.padding_token_id", v.pad_id);

  bool add_bos_default = spm;
  if (bpe && is_one_of(v.pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                               "tekken", "chameleon"})) {
    add_bos_default = true;
  }
  v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token").value_or(add_bos_default);
  v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token").value_or(false);
  v.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(spm);
  return v;
}

}  // namespace spate
