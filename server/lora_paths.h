// Runtime LoRA loading's confinement (POST /v1/load_lora_adapter, off unless
// --enable-lora-runtime-loading): a caller's lora_path must resolve, symbolic
// links and ".." followed, to a file below one of --lora-allowed-dirs; a path
// elsewhere is refused with nothing said of it but "not allowed". And the
// names callers give adapters, which are logged and listed.
//
// Thread-safety: pure functions of their arguments and the filesystem.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spate {

// The canonical form (realpath) of each --lora-allowed-dirs value; a value may
// list several directories separated by commas. "" or the error naming the
// directory (missing, not a directory, unresolvable).
std::string resolve_lora_allowed_dirs(const std::vector<std::string>& values, std::vector<std::string>& roots);

// path resolved (std::filesystem::weakly_canonical of its absolute form) when
// it lies strictly below one of roots (canonical directories), else nullopt:
// outside, or not resolvable (a symbolic link loop, a component that is not a
// directory, no permission). Never blocks on the file itself (no open).
std::optional<std::string> confine_lora_path(std::string_view path, const std::vector<std::string>& roots);

// Whether a caller's adapter name may be served and logged: 1 to 256 bytes of
// valid UTF-8 with no control characters (C0, DEL, C1).
bool valid_adapter_name(std::string_view name);

}  // namespace spate
