// libFuzzer target: the default model's tokenizer (GPT-2 byte-level BPE):
// encode arbitrary bytes (with and without special-token parsing), decode the
// ids, and for valid UTF-8 check the round trip decode(encode(x)) == x that
// the tokenizer promises where the vocabulary spells every byte (a byte
// without a token, such as 0x14 in SmolLM2's vocabulary, becomes the unknown
// token; tests/tokenizer has the regression test).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fuzz_model.h"
#include "util/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spate;
  const auto& tok = *fuzz::model().tok;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto special = tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
  (void)tok.decode(special, /*skip_special=*/false);
  const auto plain = tok.encode(text, /*add_special=*/false, /*parse_special=*/false);
  const std::string back = tok.decode(plain, /*skip_special=*/false);
  // A special token in a plain encode is the unknown token standing for an unspellable byte.
  const bool has_unk = tok.decode(plain, /*skip_special=*/true) != back;
  if (utf8::is_valid(text) && !has_unk && back != text) std::abort();  // round trip broken
  return 0;
}
