#include "server/lora_paths.h"

#include <algorithm>
#include <filesystem>

#include "util/utf8.h"

namespace spate {

namespace fs = std::filesystem;

std::string resolve_lora_allowed_dirs(const std::vector<std::string>& values, std::vector<std::string>& roots) {
  roots.clear();
  for (const auto& v : values) {
    size_t start = 0;
    while (start <= v.size()) {
      const size_t comma = std::min(v.find(',', start), v.size());
      const std::string dir = v.substr(start, comma - start);
      start = comma + 1;
      if (dir.empty()) return "--lora-allowed-dirs '" + v + "': an empty directory name";
      std::error_code ec;
      const fs::path real = fs::canonical(dir, ec);
      if (ec) return "--lora-allowed-dirs " + dir + ": " + ec.message();
      if (!fs::is_directory(real, ec)) return "--lora-allowed-dirs " + dir + ": not a directory";
      roots.push_back(real.string());
    }
  }
  return "";
}

std::optional<std::string> confine_lora_path(std::string_view path, const std::vector<std::string>& roots) {
  if (path.empty() || roots.empty() || path.find('\0') != std::string_view::npos) return std::nullopt;
  std::error_code ec;
  const fs::path abs = fs::absolute(fs::path(path), ec);
  if (ec) return std::nullopt;
  const fs::path real = fs::weakly_canonical(abs, ec);
  if (ec) return std::nullopt;
  for (const auto& root : roots) {
    const fs::path r(root);
    auto ri = r.begin();
    auto pi = real.begin();
    for (; ri != r.end() && pi != real.end() && *ri == *pi; ++ri, ++pi) {
    }
    // Every component of the root matched and at least one more follows (not the root itself).
    if (ri == r.end() && pi != real.end() && !pi->empty()) return real.string();
  }
  return std::nullopt;
}

bool valid_adapter_name(std::string_view name) {
  if (name.empty() || name.size() > 256 || !utf8::is_valid(name)) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f) return false;
    // C1 controls U+0080..U+009F are 0xC2 0x80..0x9F in UTF-8.
    if (c == 0xc2 && i + 1 < name.size() && static_cast<unsigned char>(name[i + 1]) <= 0x9f) return false;
  }
  return true;
}

}  // namespace spate
