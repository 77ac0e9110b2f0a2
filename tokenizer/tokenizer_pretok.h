// Regex pre-tokenizer for byte-level BPE vocabularies (internal to the tokenizer).
//
// A pre-tokenizer is an ordered list of PCRE2 patterns (UTF + UCP mode, so \p{L}, \p{N}, \s, ...
// follow Unicode properties). Each pattern in turn splits every current piece into its matches
// and the unmatched stretches between them; both are kept, so the pieces always tile the input.
// Each piece is matched on its own: lookarounds and $ never see text outside the piece.
// This is the splitting semantics of llama.cpp's unicode_regex_split and of a HF
// Sequence of Split(behavior="isolated") pre-tokenizers.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace spate::detail {

struct pretok_config {
  std::vector<std::string> patterns;
  bool ignore_merges = false;  // llama3-style: a piece that is itself a token is emitted whole
};

// The pattern list llama.cpp uses for a tokenizer.ggml.pre name ("" means "default").
// Throws std::runtime_error naming the value for an unknown name.
pretok_config pretok_config_for(std::string_view pre);

class regex_splitter {
 public:
  // Compiles every pattern (JIT when available); throws std::runtime_error with the PCRE2 message.
  explicit regex_splitter(const std::vector<std::string>& patterns);
  ~regex_splitter();
  regex_splitter(const regex_splitter&) = delete;
  regex_splitter& operator=(const regex_splitter&) = delete;

  // Appends the pieces of `text` (which must be valid UTF-8) to `out`. Thread-safe.
  // Throws std::runtime_error if PCRE2 reports a resource limit it cannot recover from.
  void split(std::string_view text, std::vector<std::string_view>& out) const;

 private:
  struct compiled;
  std::vector<std::unique_ptr<compiled>> patterns_;
};

}  // namespace spate::detail
