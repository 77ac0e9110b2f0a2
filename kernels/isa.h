// Instruction-set selection for the kernel dispatch tables.
//
// Contract: init_isa() is called once at start-up, from the main thread, before
// any kernel table is requested (the CLI reads SPATE_FORCE_REFERENCE and
// SPATE_MAX_ISA from the environment into its typed config and passes them
// here; nothing deep reads the environment). Afterwards active_isa() is
// read-only and thread-safe.
#pragma once

#include <string_view>

namespace spate::kernels {

// Ordered: each level includes everything the lower ones need.
//   scalar : portable C++ reference kernels, any x86-64.
//   avx2   : AVX2 + FMA + F16C (OS saves YMM state).
//   avx512 : avx2 plus AVX512F, AVX512BW, AVX512VL, AVX512_VNNI (OS saves
//            ZMM/opmask state). The matmuls of the quantized types and
//            attention have avx512 kernels; everything else runs the avx2
//            kernels at this level.
enum class isa_level { scalar = 0, avx2 = 1, avx512 = 2 };

// The highest level the CPU (and OS) supports.
isa_level detect_isa();

// True when kernels of `level` may run on this CPU (level <= detect_isa()).
bool cpu_supports(isa_level level);

// The level to run: scalar when force_reference is set, else the lower of
// `detected` and `max_level` (a cap never raises the level: max_level avx512
// on an avx2 CPU gives avx2). Pure, so that tests can pass any detected level.
isa_level choose_isa(isa_level detected, bool force_reference, isa_level max_level);

// Fixes the active level: choose_isa(detect_isa(), force_reference, max_level);
// max_level avx512 (the highest) is no cap. Returns the level chosen. Calling
// it again is allowed (tests) but not while kernels run on other threads.
// Weights are packed for one level (pack_weight): load them after this call,
// at active_isa().
isa_level init_isa(bool force_reference, isa_level max_level);

// The level in force (detect_isa() if init_isa() was never called).
isa_level active_isa();

const char* isa_name(isa_level level);

// A level's short name, as SPATE_MAX_ISA spells it: "scalar", "avx2", "avx512".
const char* isa_short_name(isa_level level);

// Parses a short name (exactly, lower case) into `level`. Returns false,
// leaving `level` unchanged, for anything else.
bool parse_isa_level(std::string_view name, isa_level& level);

// Whether single-row (batch-1 decode) matmuls at the avx512 level software-prefetch
// their weight stream: true on AMD family 1Ah (Zen 5) and later, where it measured
// +4-11% tg (docs/journal/performance.md, "Software prefetch for single rows on Zen 5"); false
// elsewhere, as on Zen 4, where it measured about 10% slower. Read once from CPUID;
// thread-safe.
bool prefetch_single_rows();

}  // namespace spate::kernels
