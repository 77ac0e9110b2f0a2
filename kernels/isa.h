// Instruction-set selection for the kernel dispatch tables.
//
// Contract: init_isa() is called once at start-up, from the main thread, before
// any kernel table is requested (the CLI reads SPATE_FORCE_REFERENCE from the
// environment into its typed config and passes it here; nothing deep reads the
// environment). Afterwards active_isa() is read-only and thread-safe.
#pragma once

namespace spate::kernels {

enum class isa_level { scalar = 0, avx2 = 1 };

// What the CPU supports: AVX2 + FMA + F16C (with OS support for YMM state).
isa_level detect_isa();

// Fixes the active level: detect_isa(), or scalar when force_reference is set.
// Returns the level chosen. Calling it again is allowed (tests) but not while
// kernels run on other threads.
isa_level init_isa(bool force_reference);

// The level in force (detect_isa() if init_isa() was never called).
isa_level active_isa();

const char* isa_name(isa_level level);

}  // namespace spate::kernels
