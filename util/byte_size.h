// Parsing and printing of byte sizes such as "2GiB", "512MiB", "1.5GB", "4096".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace spate {

// Binary (KiB, MiB, GiB, TiB, also K/M/G/T) and decimal (KB, MB, GB, TB)
// suffixes, case-insensitive; a bare number is bytes. nullopt when malformed,
// negative, or above 2^50.
std::optional<uint64_t> parse_byte_size(std::string_view text);

// "91.3 MiB"-style rendering with binary units.
std::string format_bytes(uint64_t n);

}  // namespace spate
