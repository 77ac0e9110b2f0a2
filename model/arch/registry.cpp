#include "model/arch/arch.h"

namespace spate {

// One line per architecture: X(name) registers arch_<name>, defined in
// model/arch/<family>.cpp. The order is the order of supported_archs().
#define SPATE_ARCHITECTURES(X) \
  X(llama)                     \
  X(qwen2)                     \
  X(qwen3)                     \
  X(qwen3moe)                  \
  X(gemma3)                    \
  X(gpt_oss)                   \
  X(phi3)

#define SPATE_DECLARE_ARCH(name) extern const arch_def arch_##name;
SPATE_ARCHITECTURES(SPATE_DECLARE_ARCH)
#undef SPATE_DECLARE_ARCH

namespace {

#define SPATE_ARCH_ENTRY(name) &arch_##name,
const arch_def* const k_archs[] = {SPATE_ARCHITECTURES(SPATE_ARCH_ENTRY)};
#undef SPATE_ARCH_ENTRY

}  // namespace

const arch_def* find_arch(std::string_view name) {
  for (const arch_def* a : k_archs) {
    if (a->name == name) return a;
  }
  return nullptr;
}

std::string supported_archs() {
  std::string out;
  for (const arch_def* a : k_archs) {
    if (!out.empty()) out += ", ";
    out += a->name;
  }
  return out;
}

}  // namespace spate
