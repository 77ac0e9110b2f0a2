// Tokenizer for GGUF vocabularies: byte-level BPE ("gpt2") and SentencePiece ("llama").
//
// Conformance target: llama.cpp's llama_tokenize / llama_token_to_piece for the same
// vocabulary (which in turn reproduces the Hugging Face tokenizers). The pre-tokenizer
// regexes named by tokenizer.ggml.pre run through PCRE2 in UTF + UCP mode.
//
// Input text contract: encode() accepts arbitrary bytes. Invalid UTF-8 is replaced by U+FFFD
// before anything else, one U+FFFD per maximal ill-formed subsequence (the rule of Python's
// bytes.decode(errors="replace"), i.e. what a Python/vLLM client would have sent). Malformed or
// hostile text never makes encode() throw; the only possible exception is std::runtime_error if
// PCRE2 exhausts a resource limit (not observed on 3 MB adversarial inputs; matching is linear).
//
// Thread-safety: a tokenizer is immutable after construction; all const members may be called
// concurrently. Copies share the (immutable) tables.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace spate {

// Everything the tokenizer needs, copied out of GGUF metadata (see tokenizer_gguf.h).
struct vocab_spec {
  std::string model;                 // tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece)
  std::string pre;                   // tokenizer.ggml.pre; "" is treated as "default"
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens
  std::vector<float> scores;         // tokenizer.ggml.scores (may be empty -> all 0)
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type (1 normal, 2 unknown, 3 control,
                                     // 4 user-defined, 5 unused, 6 byte); empty -> all normal
  std::vector<std::string> merges;   // tokenizer.ggml.merges ("a b"); BPE only
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1, eot_id = -1;  // -1: none
  // Defaults as llama.cpp applies them when the GGUF key is absent are filled in by the adapter
  // (vocab_spec_from_gguf); the values here are only the struct's own defaults.
  bool add_bos = false, add_eos = false, add_space_prefix = true;
  std::string name;                  // general.name; llama.cpp keys a few per-model quirks on it
                                     // (Phi-3: special tokens strip whitespace on their right)
};

// Token types as stored in tokenizer.ggml.token_type.
enum class token_type : int32_t { undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

class tokenizer {
 public:
  // Throws std::runtime_error with a clear message on an unsupported model or pre-tokenizer, or on
  // inconsistent data (array sizes, special ids out of range, missing merges, ...).
  explicit tokenizer(vocab_spec spec);

  // parse_special=false: special-token text is plain text and no BOS/EOS is added. Tokens of type
  //   user-defined are still matched literally (as llama.cpp and HF do for "added tokens").
  // parse_special=true: control/user-defined/unknown token texts are matched as tokens (longest token
  //   first), and BOS/EOS are added as the model asks (add_bos/add_eos).
  std::vector<int32_t> encode(std::string_view text, bool parse_special) const;
  // Full control: add_special adds BOS/EOS as the model asks; parse_special as above.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Raw bytes of the token's text: byte-level decoded (BPE), "▁"->space and <0xXX> -> byte (SPM).
  // Control and unknown tokens give "" unless special=true (then their literal text).
  // Throws std::out_of_range for an id outside [0, n_vocab()).
  std::string token_to_piece(int32_t id, bool special = false) const;
  // Concatenation of the pieces (special tokens skipped when skip_special, else rendered as text).
  // When the vocabulary adds a space prefix (SentencePiece), one leading space of the first piece
  // is removed, so decode(encode(x, false)) == x for valid UTF-8 x. No clean-up of spaces
  // before punctuation is done (llama.cpp's server streams pieces verbatim too).
  // May return invalid UTF-8 if the ids split a character; see incremental_decoder for streaming.
  // Throws std::out_of_range for an id outside the vocabulary.
  std::string decode(std::span<const int32_t> ids, bool skip_special = true) const;

  int32_t n_vocab() const;
  int32_t bos_id() const;  // -1 when none
  int32_t eos_id() const;  // -1 when none

  // End of generation: EOS, EOT, and control tokens such as <|im_end|>, <|eot_id|>, <|endoftext|>,
  // <end_of_turn>, <|end|> (same text list as llama.cpp, incl. FIM pad/repo/sep tokens).
  bool is_eog(int32_t id) const;
  std::optional<int32_t> find_token(std::string_view text) const;  // exact vocabulary string

 private:
  struct impl;
  std::shared_ptr<const impl> impl_;
};

// Incremental detokenizer for streaming: feed token ids one by one, get the text that is safe to
// emit now. Output is always valid UTF-8: a multi-byte character split across tokens is held back
// until complete; bytes that can never become valid are replaced by U+FFFD as soon as that is known.
// flush() at the end returns what remains (an incomplete trailing sequence becomes U+FFFD).
// Concatenating all push() results and flush() equals the U+FFFD-sanitized decode of the ids
// (without decode()'s leading-space removal unless strip_leading_space is set).
class incremental_decoder {
 public:
  // The tokenizer must outlive the decoder. skip_special: control/unknown tokens render as "".
  // strip_leading_space: drop one leading space of the first non-empty piece (decode() semantics
  // for SentencePiece); off by default because a continuation of a prompt keeps its space.
  explicit incremental_decoder(const tokenizer& tok, bool skip_special = true, bool strip_leading_space = false);

  std::string push(int32_t id);  // throws std::out_of_range for an id outside the vocabulary
  std::string flush();           // returns the held-back tail (as U+FFFD) and resets the state
  void reset();

 private:
  const tokenizer* tok_;
  bool skip_special_;
  bool strip_leading_space_;
  bool first_ = true;
  std::string pending_;  // bytes of an incomplete trailing UTF-8 sequence (at most 3)
};


}  // namespace spate
