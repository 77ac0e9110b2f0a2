// The tokenizer's tables (internal to the tokenizer library): built once by
// tokenizer_build.cpp from a vocab_spec, then read by the encoders in
// tokenizer.cpp. Immutable after build(), so concurrent const use is safe.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_pretok.h"

namespace spate {

namespace detail {

inline constexpr std::string_view k_spm_space = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// Decodes one code point of (possibly ill-formed) UTF-8 at s[i]; returns the bytes consumed
// (>= 1) and sets ok=false for an ill-formed byte (consumed alone, cp = the byte).
// Precondition: i < s.size().
size_t next_cp(std::string_view s, size_t i, uint32_t& cp, bool& ok);

// s with every occurrence of from (non-empty) replaced by to.
std::string replace_all(std::string_view s, std::string_view from, std::string_view to);

}  // namespace detail

struct tokenizer::impl {
  bool bpe = false;
  int32_t n_vocab = 0;
  std::vector<std::string> text;   // vocabulary strings (stable storage for the views in to_id)
  std::vector<float> score;
  std::vector<token_type> type;
  std::vector<uint8_t> strip;      // bit 0: lstrip, bit 1: rstrip (whitespace around a matched special)
  std::vector<std::string> piece;  // rendered bytes of each token (for control/unknown: its text)
  std::unordered_map<std::string_view, int32_t> to_id;

  int32_t bos = -1, eos = -1, unk = -1, eot = -1;
  bool add_bos = false, add_eos = false, add_space_prefix = false;

  std::vector<uint8_t> eog_flag;  // per id: ends generation

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

  // Construction (tokenizer_build.cpp). Throws std::runtime_error on an
  // unsupported or inconsistent spec; spec's token and score arrays are moved from.
  void build(vocab_spec& spec);

  // Encoding (tokenizer.cpp).
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

 private:
  // The steps of build(), in order.
  void check_spec(const vocab_spec& spec);         // model kind, array sizes, special ids, BOS/EOS flags
  void load_tokens(vocab_spec& spec);              // text, score, type, to_id
  void find_eog();                                 // EOT detection, control promotions, eog_flag
  void index_specials(const std::string& name);    // specials order, strip flags, trie
  void render_pieces();                            // piece of every token
  void build_bpe(const std::string& pre, const std::vector<std::string>& merge_list);  // splitter, merges, byte symbols
  void build_spm_bytes();                          // spm_byte
};

}  // namespace spate
