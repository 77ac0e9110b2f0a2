// Builds a vocab_spec from a GGUF file's tokenizer metadata, applying llama.cpp's defaults for
// absent keys (per tokenizer model and pre-tokenizer):
//   - special ids: SentencePiece bos=1 eos=2 unk=0; BPE bos=eos=11 (llama.cpp's legacy default);
//     a stored id outside the vocabulary is ignored (the default stays), as llama.cpp does.
//   - add_bos: SentencePiece true; BPE true only for llama3-family, tekken and chameleon pre-tokenizers.
//   - add_eos: false.  add_space_prefix: SentencePiece true, BPE false.
// Throws gguf_error (from the reader) for mistyped keys and std::runtime_error when the
// vocabulary keys are missing.
#pragma once

#include "model/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace spate {

vocab_spec vocab_spec_from_gguf(const gguf_file& f);

// Convenience: vocab_spec_from_gguf + tokenizer construction.
inline tokenizer tokenizer_from_gguf(const gguf_file& f) { return tokenizer(vocab_spec_from_gguf(f)); }

}  // namespace spate
