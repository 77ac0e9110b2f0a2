#include "kernels/isa.h"

#include <atomic>
#include <cpuid.h>

namespace spate::kernels {
namespace {

std::atomic<int> g_active{-1};

bool os_saves_ymm() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const bool osxsave = (ecx & (1u << 27)) != 0;
  if (!osxsave) return false;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 0x6u) == 0x6u;  // XMM and YMM state enabled
}

}  // namespace

isa_level detect_isa() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return isa_level::scalar;
  const bool fma = (ecx & (1u << 12)) != 0;
  const bool f16c = (ecx & (1u << 29)) != 0;
  const bool avx = (ecx & (1u << 28)) != 0;
  if (!(fma && f16c && avx && os_saves_ymm())) return isa_level::scalar;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return isa_level::scalar;
  const bool avx2 = (ebx & (1u << 5)) != 0;
  return avx2 ? isa_level::avx2 : isa_level::scalar;
}

isa_level init_isa(bool force_reference) {
  const isa_level level = force_reference ? isa_level::scalar : detect_isa();
  g_active.store(static_cast<int>(level), std::memory_order_release);
  return level;
}

isa_level active_isa() {
  int v = g_active.load(std::memory_order_acquire);
  if (v < 0) return init_isa(false);
  return static_cast<isa_level>(v);
}

const char* isa_name(isa_level level) {
  switch (level) {
    case isa_level::scalar: return "scalar-reference";
    case isa_level::avx2: return "avx2+fma+f16c";
  }
  return "unknown";
}

}  // namespace spate::kernels
