// libFuzzer target: the GGUF reader on an in-memory image (header, metadata,
// tensor infos, bounds), then what loading reads from the metadata: the typed
// model config and the tokenizer vocabulary. Malformed files are answers
// (gguf_error, std::runtime_error / invalid_argument with a message).
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/tokenizer_gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spate;
  try {
    const auto f = gguf_file::parse(data, size, "fuzz.gguf");
    try {
      (void)read_model_config(*f);
    } catch (const std::exception&) {
    }
    (void)vocab_spec_from_gguf(*f);
  } catch (const std::exception&) {
  }
  return 0;
}
