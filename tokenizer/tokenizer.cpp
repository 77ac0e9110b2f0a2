#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <stdexcept>
#include <unordered_map>

#include "tokenizer/tokenizer_pretok.h"
#include "util/utf8.h"

namespace spate {


// ---------------------------------------------------------------------------------------------
// Byte-level (GPT-2) byte <-> code point mapping
// ---------------------------------------------------------------------------------------------
namespace {

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

void append_cp(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Decodes one code point of (possibly ill-formed) UTF-8; returns bytes consumed (>= 1) and sets
// ok=false for an ill-formed byte (consumed alone).
size_t next_cp(std::string_view s, size_t i, uint32_t& cp, bool& ok) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  const size_t n = s.size() - i;
  const unsigned char b = p[0];
  ok = true;
  if (b < 0x80) {
    cp = b;
    return 1;
  }
  size_t len = 0;
  if (b >= 0xC2 && b <= 0xDF) len = 2;
  else if (b >= 0xE0 && b <= 0xEF) len = 3;
  else if (b >= 0xF0 && b <= 0xF4) len = 4;
  if (len == 0 || len > n || !utf8::is_valid(std::string_view(s.data() + i, len))) {
    ok = false;
    cp = b;
    return 1;
  }
  cp = len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (p[k] & 0x3F);
  return len;
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
    size_t len = next_cp(text, i, cp, ok);
    int b = ok ? cp_to_byte(cp) : -1;
    if (b >= 0) out += static_cast<char>(b);
    else out.append(text.data() + i, len);
    i += len;
  }
  return out;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (true) {
    size_t m = s.find(from, pos);
    if (m == std::string_view::npos) break;
    out.append(s.data() + pos, m - pos);
    out.append(to);
    pos = m + from.size();
  }
  out.append(s.data() + pos, s.size() - pos);
  return out;
}

constexpr std::string_view k_spm_space = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

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

}  // namespace

// ---------------------------------------------------------------------------------------------
// Implementation state
// ---------------------------------------------------------------------------------------------
struct tokenizer::impl {
  bool bpe = false;
  std::string pre;
  int32_t n_vocab = 0;
  std::vector<std::string> text;   // vocabulary strings (stable storage for the views in to_id)
  std::vector<float> score;
  std::vector<token_type> type;
  std::vector<uint8_t> strip;      // bit 0: lstrip, bit 1: rstrip (whitespace around a matched special)
  std::vector<std::string> piece;  // rendered bytes of each token (for control/unknown: its text)
  std::unordered_map<std::string_view, int32_t> to_id;

  int32_t bos = -1, eos = -1, unk = -1, pad = -1, eot = -1;
  bool add_bos = false, add_eos = false, add_space_prefix = false;

  std::vector<int32_t> eog;       // sorted
  std::vector<uint8_t> eog_flag;  // per id

  // Special tokens (control, user-defined, unknown) in matching order: longest text first.
  std::vector<int32_t> specials;
  // Byte trie over the special texts, used to find which specials occur in a text at all.
  std::unordered_map<uint64_t, int32_t> trie_edges;  // (node << 8 | byte) -> child node
  std::vector<int32_t> trie_token;                   // node -> token id ending here, or -1

  // BPE
  std::unique_ptr<detail::regex_splitter> splitter;
  bool ignore_merges = false;
  struct merge_info {
    int32_t rank;
    int32_t result;  // id of the merged string (real token, or virtual id >= n_vocab)
  };
  std::unordered_map<uint64_t, merge_info> merges;  // (left id << 32 | right id) -> merge
  std::array<int32_t, 256> byte_sym{};              // id of each byte's byte-level character
  std::array<std::string, 256> byte_char;           // byte-level character of each byte (UTF-8)

  // SentencePiece byte fallback
  std::array<int32_t, 256> spm_byte{};

  void build(vocab_spec& spec);
  void partition(std::string_view input, bool parse_special, std::vector<std::pair<int32_t, std::string_view>>& frags) const;
  void encode_bpe(std::string_view text, std::vector<int32_t>& out) const;
  void encode_bpe_piece(std::string_view piece, std::vector<int32_t>& out) const;
  void encode_spm(std::string_view text, std::vector<int32_t>& out) const;
  int32_t lookup(std::string_view s) const {
    auto it = to_id.find(s);
    return it == to_id.end() ? -1 : it->second;
  }
  bool is_special_type(int32_t id) const {
    auto t = type[id];
    return t == token_type::control || t == token_type::unknown;
  }
};

namespace {

void check_id(int32_t id, int32_t n, const char* what) {
  if (id < -1 || id >= n) {
    throw std::runtime_error(std::string("tokenizer: ") + what + " id " + std::to_string(id) +
                             " is outside the vocabulary of " + std::to_string(n) + " tokens");
  }
}

}  // namespace

void tokenizer::impl::build(vocab_spec& spec) {
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
  pad = spec.pad_id;
  eot = spec.eot_id;
  add_bos = spec.add_bos;
  add_eos = spec.add_eos;
  add_space_prefix = spec.add_space_prefix;
  if (add_bos && bos < 0) throw std::runtime_error("tokenizer: the vocabulary asks for BOS but has no BOS token");
  if (add_eos && eos < 0) throw std::runtime_error("tokenizer: the vocabulary asks for EOS but has no EOS token");
  pre = spec.pre.empty() ? "default" : spec.pre;

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

  // End-of-generation and other text-detected special tokens (llama.cpp's lists). A token that
  // looks like a control token but is typed otherwise is promoted to control.
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
  {
    const int32_t end_id = lookup("<|end|>");
    const bool has_return = lookup("<|return|>") >= 0, has_call = lookup("<|call|>") >= 0 || lookup("<|calls|>") >= 0;
    const bool has_flush = lookup("<|flush|>") >= 0;
    if (end_id >= 0 && ((has_return && has_call) || (has_call && has_flush))) {
      eog_set.erase(std::remove(eog_set.begin(), eog_set.end(), end_id), eog_set.end());
      type[end_id] = token_type::user_defined;
      if (eot == end_id) eot = -1;
    }
  }
  std::sort(eog_set.begin(), eog_set.end());
  eog_set.erase(std::unique(eog_set.begin(), eog_set.end()), eog_set.end());
  eog = std::move(eog_set);
  eog_flag.assign(text.size(), 0);
  for (int32_t id : eog) eog_flag[id] = 1;

  // Special tokens: matched literally before pre-tokenization, longest first.
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
  if (name_contains(spec.name, {"phi-3", "phi3"})) {
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

  // Rendered pieces.
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
        piece[i] = bpe ? byte_level_decode(t) : replace_all(t, k_spm_space, " ");
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

  if (bpe) {
    auto cfg = detail::pretok_config_for(pre);
    ignore_merges = cfg.ignore_merges;
    splitter = std::make_unique<detail::regex_splitter>(cfg.patterns);
    if (spec.merges.empty()) throw std::runtime_error("tokenizer: BPE vocabulary without merges (tokenizer.ggml.merges)");
    // Strings that occur in merges but are not tokens get virtual ids >= n_vocab.
    std::unordered_map<std::string, int32_t> virt;
    auto id_of = [&](std::string&& s) -> int32_t {
      if (int32_t id = lookup(s); id >= 0) return id;
      auto [it, inserted] = virt.emplace(std::move(s), 0);
      if (inserted) it->second = n_vocab + static_cast<int32_t>(virt.size()) - 1;
      return it->second;
    };
    merges.reserve(spec.merges.size() * 2);
    for (size_t r = 0; r < spec.merges.size(); ++r) {
      const std::string& m = spec.merges[r];
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
      append_cp(byte_char[b], f[b]);
      int32_t id = lookup(byte_char[b]);
      if (id < 0) {
        auto it = virt.find(byte_char[b]);
        id = it == virt.end() ? -1 : it->second;
      }
      byte_sym[b] = id;
    }
  } else {
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
}

// Splits text on occurrences of special tokens, llama.cpp's way: for each special token in
// order (longest first), every text fragment is cut at each of its occurrences. Fragments are
// (token id, -) or (-1, text).
void tokenizer::impl::partition(std::string_view input, bool parse_special,
                                std::vector<std::pair<int32_t, std::string_view>>& frags) const {
  frags.clear();
  if (input.empty()) return;
  frags.emplace_back(-1, input);
  if (specials.empty()) return;

  // Which special tokens occur anywhere in the text?
  std::vector<int32_t> present;
  for (size_t i = 0; i < input.size(); ++i) {
    int32_t node = 0;
    for (size_t j = i; j < input.size(); ++j) {
      auto it = trie_edges.find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(input[j]));
      if (it == trie_edges.end()) break;
      node = it->second;
      if (trie_token[node] >= 0) present.push_back(trie_token[node]);
    }
  }
  if (present.empty()) return;
  std::sort(present.begin(), present.end());
  present.erase(std::unique(present.begin(), present.end()), present.end());

  std::vector<std::pair<int32_t, std::string_view>> next;
  for (int32_t id : specials) {
    if (!std::binary_search(present.begin(), present.end(), id)) continue;
    if (!parse_special && type[id] != token_type::user_defined) continue;
    const std::string& tok = text[id];
    next.clear();
    for (auto& fr : frags) {
      if (fr.first >= 0) {
        next.push_back(fr);
        continue;
      }
      std::string_view rest = fr.second;
      while (!rest.empty()) {
        size_t m = rest.find(tok);
        if (m == std::string_view::npos) break;
        std::string_view left = rest.substr(0, m);
        if (strip[id] & 1) {
          while (!left.empty() && std::isspace(static_cast<unsigned char>(left.back()))) left.remove_suffix(1);
        }
        if (!left.empty()) next.emplace_back(-1, left);
        next.emplace_back(id, std::string_view());
        rest.remove_prefix(m + tok.size());
        if (strip[id] & 2) {
          while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.front()))) rest.remove_prefix(1);
        }
      }
      if (!rest.empty()) next.emplace_back(-1, rest);
    }
    frags.swap(next);
  }
}

void tokenizer::impl::encode_bpe(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<std::string_view> pieces;
  splitter->split(text, pieces);
  for (auto p : pieces) encode_bpe_piece(p, out);
}

// Merges the bytes of one pre-tokenized piece by rank: repeatedly the adjacent pair with the lowest
// merge rank (leftmost on ties) is replaced by its merge, until no adjacent pair has a merge.
void tokenizer::impl::encode_bpe_piece(std::string_view p, std::vector<int32_t>& out) const {
  if (p.empty()) return;
  if (ignore_merges) {
    std::string enc;
    enc.reserve(p.size() * 2);
    for (unsigned char c : p) enc += byte_char[c];
    if (int32_t id = lookup(enc); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  struct sym {
    int32_t id;
    int32_t prev, next;
    uint32_t off, len;
  };
  struct cand {
    int32_t rank;
    int32_t left, right;
    uint32_t llen, rlen;
  };
  auto worse = [](const cand& a, const cand& b) { return a.rank > b.rank || (a.rank == b.rank && a.left > b.left); };
  const int32_t n = static_cast<int32_t>(p.size());
  std::vector<sym> syms(n);
  for (int32_t i = 0; i < n; ++i) {
    syms[i] = sym{byte_sym[static_cast<unsigned char>(p[i])], i - 1, i + 1 < n ? i + 1 : -1, static_cast<uint32_t>(i), 1};
  }
  std::vector<cand> heap;
  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const sym& a = syms[l];
    const sym& b = syms[r];
    if (a.id < 0 || b.id < 0) return;
    auto it = merges.find((static_cast<uint64_t>(static_cast<uint32_t>(a.id)) << 32) | static_cast<uint32_t>(b.id));
    if (it == merges.end()) return;
    heap.push_back(cand{it->second.rank, l, r, a.len, b.len});
    std::push_heap(heap.begin(), heap.end(), worse);
  };
  for (int32_t i = 0; i + 1 < n; ++i) try_add(i, i + 1);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    cand c = heap.back();
    heap.pop_back();
    sym& a = syms[c.left];
    sym& b = syms[c.right];
    // Stale when either side has changed since the candidate was queued.
    if (a.len != c.llen || b.len != c.rlen || a.next != c.right) continue;
    auto it = merges.find((static_cast<uint64_t>(static_cast<uint32_t>(a.id)) << 32) | static_cast<uint32_t>(b.id));
    a.id = it->second.result;
    a.len += b.len;
    b.len = 0;
    a.next = b.next;
    if (b.next >= 0) syms[b.next].prev = c.left;
    try_add(a.prev, c.left);
    try_add(c.left, a.next);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) {
    const sym& s = syms[i];
    if (s.id >= 0 && s.id < n_vocab) {
      out.push_back(s.id);
      continue;
    }
    // Not a token (a merge result missing from the vocabulary): fall back to single bytes.
    for (uint32_t k = 0; k < s.len; ++k) {
      int32_t id = byte_sym[static_cast<unsigned char>(p[s.off + k])];
      if (id >= 0 && id < n_vocab) out.push_back(id);
      else if (unk >= 0) out.push_back(unk);
    }
  }
}

// SentencePiece BPE: start from characters and repeatedly merge the adjacent pair whose
// concatenation is the highest-scoring vocabulary entry (leftmost on ties). Characters that end
// up outside the vocabulary are emitted as <0xXX> byte tokens.
void tokenizer::impl::encode_spm(std::string_view t, std::vector<int32_t>& out) const {
  if (t.empty()) return;
  struct sym {
    int32_t prev, next;
    uint32_t off, len;
  };
  struct cand {
    float score;
    int32_t left, right;
    uint32_t size;
  };
  auto worse = [](const cand& a, const cand& b) { return a.score < b.score || (a.score == b.score && a.left > b.left); };
  std::vector<sym> syms;
  syms.reserve(t.size());
  for (size_t i = 0; i < t.size();) {
    uint32_t cp;
    bool ok;
    size_t len = next_cp(t, i, cp, ok);
    int32_t idx = static_cast<int32_t>(syms.size());
    syms.push_back(sym{idx - 1, -1, static_cast<uint32_t>(i), static_cast<uint32_t>(len)});
    if (idx > 0) syms[idx - 1].next = idx;
    i += len;
  }
  std::vector<cand> heap;
  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t size = syms[l].len + syms[r].len;
    int32_t id = lookup(t.substr(syms[l].off, size));
    if (id < 0) return;
    heap.push_back(cand{score[id], l, r, size});
    std::push_heap(heap.begin(), heap.end(), worse);
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(syms.size()); ++i) try_add(i, i + 1);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    cand c = heap.back();
    heap.pop_back();
    sym& a = syms[c.left];
    sym& b = syms[c.right];
    if (a.len == 0 || b.len == 0 || a.next != c.right || a.len + b.len != c.size) continue;
    a.len += b.len;
    b.len = 0;
    a.next = b.next;
    if (b.next >= 0) syms[b.next].prev = c.left;
    try_add(a.prev, c.left);
    try_add(c.left, a.next);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) {
    const sym& s = syms[i];
    int32_t id = lookup(t.substr(s.off, s.len));
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (uint32_t k = 0; k < s.len; ++k) {
      int32_t bid = spm_byte[static_cast<unsigned char>(t[s.off + k])];
      if (bid >= 0) out.push_back(bid);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------------
tokenizer::tokenizer(vocab_spec spec) {
  auto p = std::make_shared<impl>();
  p->build(spec);
  impl_ = std::move(p);
}

std::vector<int32_t> tokenizer::encode(std::string_view text, bool parse_special) const {
  return encode(text, parse_special, parse_special);
}

std::vector<int32_t> tokenizer::encode(std::string_view raw, bool add_special, bool parse_special) const {
  const impl& m = *impl_;
  std::string owned;
  std::string_view text = raw;
  if (!utf8::is_valid(raw)) {
    owned = utf8::sanitize(raw);
    text = owned;
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && m.add_bos) out.push_back(m.bos);

  std::vector<std::pair<int32_t, std::string_view>> frags;
  m.partition(text, parse_special, frags);
  if (m.bpe) {
    for (const auto& [id, s] : frags) {
      if (id >= 0) out.push_back(id);
      else m.encode_bpe(s, out);
    }
  } else {
    bool prev_special = true;  // the first fragment gets the space prefix too
    std::string buf;
    for (const auto& [id, s] : frags) {
      if (id >= 0) {
        out.push_back(id);
        prev_special = true;
        continue;
      }
      buf.clear();
      if (m.add_space_prefix && prev_special) buf += ' ';
      buf.append(s);
      m.encode_spm(replace_all(buf, " ", k_spm_space), out);
      prev_special = false;
    }
  }
  if (add_special && m.add_eos) out.push_back(m.eos);
  return out;
}

std::string tokenizer::token_to_piece(int32_t id, bool special) const {
  const impl& m = *impl_;
  if (id < 0 || id >= m.n_vocab) {
    throw std::out_of_range("tokenizer: token id " + std::to_string(id) + " is outside the vocabulary of " +
                            std::to_string(m.n_vocab) + " tokens");
  }
  if (!special && m.is_special_type(id)) return {};
  return m.piece[id];
}

std::string tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  bool strip = impl_->add_space_prefix;
  for (int32_t id : ids) {
    std::string p = token_to_piece(id, !skip_special);
    if (p.empty()) continue;
    if (strip) {
      strip = false;
      if (p[0] == ' ') {
        out.append(p, 1);
        continue;
      }
    }
    out += p;
  }
  return out;
}

int32_t tokenizer::n_vocab() const { return impl_->n_vocab; }
int32_t tokenizer::bos_id() const { return impl_->bos; }
int32_t tokenizer::eos_id() const { return impl_->eos; }
int32_t tokenizer::eot_id() const { return impl_->eot; }
int32_t tokenizer::unk_id() const { return impl_->unk; }
int32_t tokenizer::pad_id() const { return impl_->pad; }
bool tokenizer::add_bos() const { return impl_->add_bos; }
bool tokenizer::add_eos() const { return impl_->add_eos; }
bool tokenizer::add_space_prefix() const { return impl_->add_space_prefix; }
bool tokenizer::is_byte_level() const { return impl_->bpe; }
const std::string& tokenizer::pre() const { return impl_->pre; }

bool tokenizer::is_eog(int32_t id) const { return id >= 0 && id < impl_->n_vocab && impl_->eog_flag[id]; }
std::span<const int32_t> tokenizer::eog_ids() const { return impl_->eog; }
bool tokenizer::is_control(int32_t id) const {
  return id >= 0 && id < impl_->n_vocab && impl_->type[id] == token_type::control;
}
token_type tokenizer::type_of(int32_t id) const {
  return id >= 0 && id < impl_->n_vocab ? impl_->type[id] : token_type::undefined;
}
const std::string& tokenizer::token_text(int32_t id) const {
  if (id < 0 || id >= impl_->n_vocab) throw std::out_of_range("tokenizer: token id " + std::to_string(id) + " out of range");
  return impl_->text[id];
}
std::optional<int32_t> tokenizer::find_token(std::string_view text) const {
  int32_t id = impl_->lookup(text);
  if (id < 0) return std::nullopt;
  return id;
}

// ---------------------------------------------------------------------------------------------
// incremental_decoder
// ---------------------------------------------------------------------------------------------
incremental_decoder::incremental_decoder(const tokenizer& tok, bool skip_special, bool strip_leading_space)
    : tok_(&tok), skip_special_(skip_special), strip_leading_space_(strip_leading_space) {}

std::string incremental_decoder::push(int32_t id) {
  std::string p = tok_->token_to_piece(id, !skip_special_);
  if (p.empty()) return {};
  if (first_) {
    first_ = false;
    if (strip_leading_space_ && p[0] == ' ') p.erase(0, 1);
  }
  pending_ += p;
  const size_t keep_from = utf8::complete_prefix_len(pending_);
  std::string ready = utf8::sanitize(std::string_view(pending_).substr(0, keep_from));
  pending_.erase(0, keep_from);
  return ready;
}

std::string incremental_decoder::flush() {
  std::string rest = utf8::sanitize(pending_);
  reset();
  return rest;
}

void incremental_decoder::reset() {
  pending_.clear();
  first_ = true;
}

}  // namespace spate
