// libFuzzer target: one Responses WebSocket-mode client message
// (ws_parse_message: the event envelope, the Responses request, its
// preparation), and the error event built from a refusal.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_model.h"
#include "protocol/ws_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spate;
  const auto& m = fuzz::model();
  ws_create c;
  if (auto err = ws_parse_message(m.served, std::string_view(reinterpret_cast<const char*>(data), size), c)) {
    (void)ws_error_event(*err, 1);
  }
  return 0;
}
