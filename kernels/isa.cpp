#include "kernels/isa.h"

#include <atomic>
#include <cpuid.h>

namespace spate::kernels {
namespace {

std::atomic<int> g_active{-1};

// XCR0 (the state components the OS saves on context switch); 0 without OSXSAVE.
unsigned xcr0() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
  const bool osxsave = (ecx & (1u << 27)) != 0;
  if (!osxsave) return 0;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return lo;
}

isa_level detect_uncached() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return isa_level::scalar;
  const bool fma = (ecx & (1u << 12)) != 0;
  const bool f16c = (ecx & (1u << 29)) != 0;
  const bool avx = (ecx & (1u << 28)) != 0;
  const unsigned xcr = xcr0();
  const bool os_ymm = (xcr & 0x6u) == 0x6u;     // XMM and YMM state
  const bool os_zmm = (xcr & 0xe0u) == 0xe0u;   // opmask, ZMM0-15 upper halves, ZMM16-31
  if (!(fma && f16c && avx && os_ymm)) return isa_level::scalar;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return isa_level::scalar;
  const bool avx2 = (ebx & (1u << 5)) != 0;
  if (!avx2) return isa_level::scalar;
  const bool avx512f = (ebx & (1u << 16)) != 0;
  const bool avx512bw = (ebx & (1u << 30)) != 0;
  const bool avx512vl = (ebx & (1u << 31)) != 0;
  const bool avx512vnni = (ecx & (1u << 11)) != 0;
  if (avx512f && avx512bw && avx512vl && avx512vnni && os_zmm) return isa_level::avx512;
  return isa_level::avx2;
}

// AMD family 1Ah (Zen 5) or later: the display family of CPUID leaf 1 on an AMD CPU.
bool amd_zen5_or_later() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return false;
  const bool amd = ebx == 0x68747541u && edx == 0x69746e65u && ecx == 0x444d4163u;  // "AuthenticAMD"
  if (!amd || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const unsigned base = (eax >> 8) & 0xfu, ext = (eax >> 20) & 0xffu;
  const unsigned family = base == 0xfu ? base + ext : base;
  return family >= 0x1au;
}

}  // namespace

bool prefetch_single_rows() {
  static const bool yes = amd_zen5_or_later();
  return yes;
}

isa_level detect_isa() {
  static const isa_level level = detect_uncached();
  return level;
}

bool cpu_supports(isa_level level) { return static_cast<int>(level) <= static_cast<int>(detect_isa()); }

isa_level choose_isa(isa_level detected, bool force_reference, isa_level max_level) {
  if (force_reference) return isa_level::scalar;
  return static_cast<int>(max_level) < static_cast<int>(detected) ? max_level : detected;
}

isa_level init_isa(bool force_reference, isa_level max_level) {
  const isa_level level = choose_isa(detect_isa(), force_reference, max_level);
  g_active.store(static_cast<int>(level), std::memory_order_release);
  return level;
}

isa_level active_isa() {
  int v = g_active.load(std::memory_order_acquire);
  if (v < 0) return init_isa(false, isa_level::avx512);
  return static_cast<isa_level>(v);
}

const char* isa_name(isa_level level) {
  switch (level) {
    case isa_level::scalar: return "scalar-reference";
    case isa_level::avx2: return "avx2+fma+f16c";
    case isa_level::avx512: return "avx512vnni+avx2+fma+f16c";
  }
  return "unknown";
}

const char* isa_short_name(isa_level level) {
  switch (level) {
    case isa_level::scalar: return "scalar";
    case isa_level::avx2: return "avx2";
    case isa_level::avx512: return "avx512";
  }
  return "unknown";
}

bool parse_isa_level(std::string_view name, isa_level& level) {
  for (const isa_level l : {isa_level::scalar, isa_level::avx2, isa_level::avx512}) {
    if (name == isa_short_name(l)) {
      level = l;
      return true;
    }
  }
  return false;
}

}  // namespace spate::kernels
