// Encoding and decoding over the tables of tokenizer_impl.h: special-token
// partitioning, byte-level BPE merges, SentencePiece merges, detokenization.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "tokenizer/tokenizer_impl.h"
#include "util/utf8.h"

namespace spate {

namespace detail {

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

}  // namespace detail

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
    size_t len = detail::next_cp(t, i, cp, ok);
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
      m.encode_spm(detail::replace_all(buf, " ", detail::k_spm_space), out);
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

bool tokenizer::is_eog(int32_t id) const { return id >= 0 && id < impl_->n_vocab && impl_->eog_flag[id]; }
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
