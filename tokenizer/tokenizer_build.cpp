// Construction of the tokenizer's tables from a vocab_spec: validation, the
// token index, end-of-generation detection, special-token matching order,
// rendered pieces, and the BPE merge or SentencePiece byte tables.
#include <algorithm>
#include <array>
#include <cctype>
#include <stdexcept>

#include "tokenizer/tokenizer_impl.h"
#include "util/utf8.h"

namespace spate {
namespace {

// ---------------------------------------------------------------------------------------------
// Byte-level (GPT-2) byte <-> code point mapping
// ---------------------------------------------------------------------------------------------

// Bytes that print as themselves map to the same code point; the other 68 bytes map, in order,
// to U+0100.. so that every byte has a visible, non-space character.
bool byte_is_printable(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); }

std::array<uint32_t, 256> make_byte_to_cp() {
  std::array<uint32_t, 256> m{};
  uint32_t next = 256;
  for (unsigned b = 0; b < 256; ++b) m[b] = byte_is_printable(b) ? b : next++;
  return m;
}

const std::array<uint32_t, 256>& byte_to_cp() {
  static const auto m = make_byte_to_cp();
  return m;
}

// -1 when the code point is not the image of a byte.
int cp_to_byte(uint32_t cp) {
  static const auto inv = [] {
    std::array<int16_t, 324> a;
    a.fill(-1);
    const auto& f = byte_to_cp();
    for (unsigned b = 0; b < 256; ++b) a[f[b]] = static_cast<int16_t>(b);
    return a;
  }();
  return cp < inv.size() ? inv[cp] : -1;
}

// Token text (byte-level alphabet) -> raw bytes. Characters outside the alphabet are kept as
// their UTF-8 (some vocabularies carry a few such tokens).
std::string byte_level_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp;
    bool ok;
    size_t len = detail::next_cp(text, i, cp, ok);
    int b = ok ? cp_to_byte(cp) : -1;
    if (b >= 0) out += static_cast<char>(b);
    else out.append(text.data() + i, len);
    i += len;
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xAB>" -> 0xAB, or -1.
int parse_byte_token(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

bool name_contains(const std::string& name, std::initializer_list<std::string_view> parts) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (auto p : parts) {
    if (lower.find(p) != std::string::npos) return true;
  }
  return false;
}

void check_id(int32_t id, int32_t n, const char* what) {
  if (id < -1 || id >= n) {
    throw std::runtime_error(std::string("tokenizer: ") + what + " id " + std::to_string(id) +
                             " is outside the vocabulary of " + std::to_string(n) + " tokens");
  }
}

}  // namespace

void tokenizer::impl::build(vocab_spec& spec) {
  check_spec(spec);
  const std::string pre = spec.pre.empty() ? "default" : spec.pre;
  load_tokens(spec);
  find_eog();
  index_specials(spec.name);
  render_pieces();
  if (bpe) {
    build_bpe(pre, spec.merges);
  } else {
    build_spm_bytes();
  }
}

void tokenizer::impl::check_spec(const vocab_spec& spec) {
  if (spec.model == "gpt2") {
    bpe = true;
  } else if (spec.model == "llama") {
    bpe = false;
  } else {
    throw std::runtime_error("tokenizer: unsupported tokenizer model tokenizer.ggml.model='" + spec.model +
                             "' (supported: gpt2 = byte-level BPE, llama = SentencePiece)");
  }
  if (spec.tokens.empty()) throw std::runtime_error("tokenizer: the vocabulary is empty");
  if (spec.tokens.size() > static_cast<size_t>(INT32_MAX / 2)) throw std::runtime_error("tokenizer: vocabulary too large");
  n_vocab = static_cast<int32_t>(spec.tokens.size());
  if (!spec.scores.empty() && spec.scores.size() != spec.tokens.size()) {
    throw std::runtime_error("tokenizer: " + std::to_string(spec.scores.size()) + " scores for " +
                             std::to_string(spec.tokens.size()) + " tokens");
  }
  if (!spec.token_types.empty() && spec.token_types.size() != spec.tokens.size()) {
    throw std::runtime_error("tokenizer: " + std::to_string(spec.token_types.size()) + " token types for " +
                             std::to_string(spec.tokens.size()) + " tokens");
  }
  check_id(spec.bos_id, n_vocab, "BOS");
  check_id(spec.eos_id, n_vocab, "EOS");
  check_id(spec.unk_id, n_vocab, "UNK");
  check_id(spec.pad_id, n_vocab, "PAD");
  check_id(spec.eot_id, n_vocab, "EOT");
  bos = spec.bos_id;
  eos = spec.eos_id;
  unk = spec.unk_id;
  eot = spec.eot_id;
  add_bos = spec.add_bos;
  add_eos = spec.add_eos;
  add_space_prefix = spec.add_space_prefix;
  if (add_bos && bos < 0) throw std::runtime_error("tokenizer: the vocabulary asks for BOS but has no BOS token");
  if (add_eos && eos < 0) throw std::runtime_error("tokenizer: the vocabulary asks for EOS but has no EOS token");
}

void tokenizer::impl::load_tokens(vocab_spec& spec) {
  text = std::move(spec.tokens);
  score = std::move(spec.scores);
  score.resize(text.size(), 0.0f);
  type.resize(text.size(), token_type::normal);
  for (size_t i = 0; i < spec.token_types.size(); ++i) {
    int32_t t = spec.token_types[i];
    type[i] = (t >= 1 && t <= 6) ? static_cast<token_type>(t) : token_type::undefined;
  }
  for (int32_t i = 0; i < n_vocab; ++i) {
    // An empty string can never be matched or produced; give it a unique stand-in text (as llama.cpp).
    if (text[i].empty()) text[i] = "[EMPTY_" + std::to_string(i) + "]";
  }
  to_id.reserve(text.size() * 2);
  for (int32_t i = 0; i < n_vocab; ++i) to_id[text[i]] = i;  // duplicates: the last id wins
}

// End-of-generation and other text-detected special tokens (llama.cpp's lists). A token that
// looks like a control token but is typed otherwise is promoted to control.
void tokenizer::impl::find_eog() {
  auto promote = [&](int32_t id) {
    if (type[id] != token_type::control) type[id] = token_type::control;
  };
  auto first_present = [&](std::initializer_list<std::string_view> names) -> int32_t {
    for (auto nm : names) {
      if (int32_t id = lookup(nm); id >= 0) return id;
    }
    return -1;
  };
  std::vector<int32_t> eog_set;
  if (eot < 0) {
    eot = first_present({"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
                         "<EOT>", "_<EOT>", "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                         "<end_of_utterance>"});
    if (eot >= 0) promote(eot);
  }
  int32_t eom = first_present({"<|eom_id|>"});
  if (eom >= 0) promote(eom);
  for (int32_t id : {first_present({"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}),
                     first_present({"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}),
                     first_present({"<|file_sep|>"})}) {
    if (id >= 0) {
      promote(id);
      eog_set.push_back(id);
    }
  }
  for (std::string_view nm : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
                              "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
                              "<|end_of_text|>", "<end_of_utterance>"}) {
    if (int32_t id = lookup(nm); id >= 0) {
      promote(id);
      eog_set.push_back(id);
    }
  }
  for (int32_t id : {eos, eot, eom}) {
    if (id >= 0) eog_set.push_back(id);
  }
  // gpt-oss / solar-open: "<|end|>" ends a message, not the generation.
  const int32_t end_id = lookup("<|end|>");
  const bool has_return = lookup("<|return|>") >= 0, has_call = lookup("<|call|>") >= 0 || lookup("<|calls|>") >= 0;
  const bool has_flush = lookup("<|flush|>") >= 0;
  if (end_id >= 0 && ((has_return && has_call) || (has_call && has_flush))) {
    eog_set.erase(std::remove(eog_set.begin(), eog_set.end(), end_id), eog_set.end());
    type[end_id] = token_type::user_defined;
    if (eot == end_id) eot = -1;
  }
  // gpt-oss (llama.cpp's "quick hack"): harmony's structure tokens are text,
  // so that the output can be parsed (protocol/harmony.h).
  for (std::string_view nm : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    if (int32_t id = lookup(nm); id >= 0) type[id] = token_type::user_defined;
  }
  eog_flag.assign(text.size(), 0);
  for (int32_t id : eog_set) eog_flag[id] = 1;
}

// Special tokens: matched literally before pre-tokenization, longest first.
void tokenizer::impl::index_specials(const std::string& name) {
  strip.assign(text.size(), 0);
  for (int32_t i = 0; i < n_vocab; ++i) {
    auto t = type[i];
    // Only well-formed texts: matches then always fall on character boundaries of the (sanitized) input.
    if ((t == token_type::control || t == token_type::user_defined || t == token_type::unknown) &&
        utf8::is_valid(text[i])) {
      specials.push_back(i);
    }
  }
  std::stable_sort(specials.begin(), specials.end(),
                   [&](int32_t a, int32_t b) { return text[a].size() > text[b].size(); });
  if (name_contains(name, {"phi-3", "phi3"})) {
    // llama.cpp: Phi-3's special tokens swallow whitespace on their right, except <unk>, <s>, <|endoftext|>.
    for (int32_t id : specials) strip[id] |= 2;
    if (int32_t id = lookup("</s>"); id >= 0) strip[id] |= 2;
    for (std::string_view nm : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (int32_t id = lookup(nm); id >= 0) strip[id] &= ~2;
    }
  }
  trie_token.push_back(-1);
  for (int32_t id : specials) {
    int32_t node = 0;
    for (unsigned char c : text[id]) {
      uint64_t key = (static_cast<uint64_t>(node) << 8) | c;
      auto it = trie_edges.find(key);
      if (it == trie_edges.end()) {
        int32_t child = static_cast<int32_t>(trie_token.size());
        trie_token.push_back(-1);
        it = trie_edges.emplace(key, child).first;
      }
      node = it->second;
    }
    if (trie_token[node] < 0) trie_token[node] = id;
  }
}

void tokenizer::impl::render_pieces() {
  piece.resize(text.size());
  for (int32_t i = 0; i < n_vocab; ++i) {
    const std::string& t = text[i];
    switch (type[i]) {
      case token_type::control:
      case token_type::unknown:
      case token_type::user_defined:
        piece[i] = t;
        break;
      case token_type::normal:
        piece[i] = bpe ? byte_level_decode(t) : detail::replace_all(t, detail::k_spm_space, " ");
        break;
      case token_type::byte:
        if (bpe) {
          piece[i] = byte_level_decode(t);
        } else {
          int b = parse_byte_token(t);
          piece[i] = b >= 0 ? std::string(1, static_cast<char>(b)) : t;
        }
        break;
      case token_type::unused:
      case token_type::undefined:
        piece[i].clear();
        break;
    }
  }
}

void tokenizer::impl::build_bpe(const std::string& pre, const std::vector<std::string>& merge_list) {
  auto cfg = detail::pretok_config_for(pre);
  ignore_merges = cfg.ignore_merges;
  splitter = std::make_unique<detail::regex_splitter>(cfg.patterns);
  if (merge_list.empty()) throw std::runtime_error("tokenizer: BPE vocabulary without merges (tokenizer.ggml.merges)");
  // Strings that occur in merges but are not tokens get virtual ids >= n_vocab.
  std::unordered_map<std::string, int32_t> virt;
  auto id_of = [&](std::string&& s) -> int32_t {
    if (int32_t id = lookup(s); id >= 0) return id;
    auto [it, inserted] = virt.emplace(std::move(s), 0);
    if (inserted) it->second = n_vocab + static_cast<int32_t>(virt.size()) - 1;
    return it->second;
  };
  merges.reserve(merge_list.size() * 2);
  for (size_t r = 0; r < merge_list.size(); ++r) {
    const std::string& m = merge_list[r];
    size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (sp == std::string::npos || sp + 1 >= m.size()) {
      throw std::runtime_error("tokenizer: malformed merge #" + std::to_string(r) + " '" + m + "'");
    }
    int32_t a = id_of(m.substr(0, sp));
    int32_t b = id_of(m.substr(sp + 1));
    int32_t ab = id_of(m.substr(0, sp) + m.substr(sp + 1));
    uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
    merges.emplace(key, merge_info{static_cast<int32_t>(r), ab});  // a repeated pair keeps its first rank
  }
  const auto& f = byte_to_cp();
  for (unsigned b = 0; b < 256; ++b) {
    byte_char[b].clear();
    utf8::append(byte_char[b], f[b]);
    int32_t id = lookup(byte_char[b]);
    if (id < 0) {
      auto it = virt.find(byte_char[b]);
      id = it == virt.end() ? -1 : it->second;
    }
    byte_sym[b] = id;
  }
}

void tokenizer::impl::build_spm_bytes() {
  for (unsigned b = 0; b < 256; ++b) {
    static const char* hex = "0123456789ABCDEF";
    const char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
    int32_t id = lookup(std::string_view(buf, 6));
    if (id < 0) {
      const char c = static_cast<char>(b);
      id = lookup(std::string_view(&c, 1));  // vocabularies without byte tokens: the byte itself
    }
    spm_byte[b] = id >= 0 ? id : unk;
  }
}

}  // namespace spate
