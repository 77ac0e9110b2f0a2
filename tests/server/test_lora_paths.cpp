#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "server/lora_paths.h"

namespace spate {
namespace {

namespace fs = std::filesystem;

class LoraPaths : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::canonical(fs::temp_directory_path()) / ("spate-lora-paths-" + std::to_string(::getpid()));
    fs::create_directories(base_ / "allowed" / "sub");
    fs::create_directories(base_ / "allowed-not");
    fs::create_directories(base_ / "outside");
    for (const char* f : {"allowed/a.gguf", "allowed/sub/b.gguf", "allowed-not/c.gguf", "outside/secret.gguf"})
      std::ofstream(base_ / f) << "x";
    fs::create_symlink(base_ / "outside" / "secret.gguf", base_ / "allowed" / "escape.gguf");
    fs::create_symlink(base_ / "outside", base_ / "allowed" / "outdir");
    fs::create_symlink(base_ / "allowed" / "sub" / "b.gguf", base_ / "allowed" / "inside-link.gguf");
    ASSERT_EQ(resolve_lora_allowed_dirs({(base_ / "allowed").string()}, roots_), "");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(base_, ec);
  }
  std::optional<std::string> confine(const std::string& rel) const { return confine_lora_path((base_ / rel).string(), roots_); }
  fs::path base_;
  std::vector<std::string> roots_;
};

TEST_F(LoraPaths, AllowsFilesBelowTheAllowedDirectories) {
  EXPECT_EQ(confine("allowed/a.gguf"), (base_ / "allowed" / "a.gguf").string());
  EXPECT_EQ(confine("allowed/sub/b.gguf"), (base_ / "allowed" / "sub" / "b.gguf").string());
  EXPECT_EQ(confine("allowed/sub/../a.gguf"), (base_ / "allowed" / "a.gguf").string());
  EXPECT_EQ(confine("allowed/inside-link.gguf"), (base_ / "allowed" / "sub" / "b.gguf").string());
  // A file that does not exist below the directory: allowed (its load then says it is missing).
  EXPECT_EQ(confine("allowed/none.gguf"), (base_ / "allowed" / "none.gguf").string());
}

TEST_F(LoraPaths, RefusesEscapesBySymlinksDotDotAndPrefixes) {
  EXPECT_FALSE(confine("allowed/escape.gguf"));         // a symlink to a file outside
  EXPECT_FALSE(confine("allowed/outdir/secret.gguf"));  // through a symlinked directory
  EXPECT_FALSE(confine("allowed/../outside/secret.gguf"));
  EXPECT_FALSE(confine("allowed/sub/../../outside/secret.gguf"));
  EXPECT_FALSE(confine("allowed-not/c.gguf"));  // a sibling whose name starts with the root's
  EXPECT_FALSE(confine("allowed"));             // the directory itself
  EXPECT_FALSE(confine("allowed/"));
  EXPECT_FALSE(confine_lora_path("/etc/passwd", roots_));
  EXPECT_FALSE(confine_lora_path("", roots_));
  EXPECT_FALSE(confine_lora_path((base_ / "allowed" / "a.gguf").string(), {}));  // no roots: nothing is allowed
}

TEST_F(LoraPaths, RefusesASymlinkLoop) {
  fs::create_symlink(base_ / "allowed" / "loop.gguf", base_ / "allowed" / "loop.gguf");
  EXPECT_FALSE(confine("allowed/loop.gguf"));
}

TEST_F(LoraPaths, ResolvesCommaSeparatedAndRepeatedDirectories) {
  std::vector<std::string> roots;
  ASSERT_EQ(resolve_lora_allowed_dirs({(base_ / "allowed").string() + "," + (base_ / "outside").string(),
                                       (base_ / "allowed" / "outdir").string()},
                                      roots),
            "");
  ASSERT_EQ(roots.size(), 3u);
  EXPECT_EQ(roots[2], (base_ / "outside").string());  // symlinks resolved
  EXPECT_TRUE(confine_lora_path((base_ / "outside" / "secret.gguf").string(), roots));
  EXPECT_NE(resolve_lora_allowed_dirs({(base_ / "missing").string()}, roots).find("--lora-allowed-dirs"), std::string::npos);
  EXPECT_NE(resolve_lora_allowed_dirs({(base_ / "allowed" / "a.gguf").string()}, roots).find("not a directory"), std::string::npos);
  EXPECT_NE(resolve_lora_allowed_dirs({(base_ / "allowed").string() + ","}, roots).find("empty"), std::string::npos);
}

TEST(AdapterNames, RefusesControlCharacters) {
  EXPECT_TRUE(valid_adapter_name("my-adapter_1.v2"));
  EXPECT_TRUE(valid_adapter_name("réglage"));
  EXPECT_FALSE(valid_adapter_name(""));
  EXPECT_FALSE(valid_adapter_name(std::string(257, 'a')));
  EXPECT_TRUE(valid_adapter_name(std::string(256, 'a')));
  EXPECT_FALSE(valid_adapter_name("x\nE 12-02 00:00:00.000 forged"));
  EXPECT_FALSE(valid_adapter_name("x\r"));
  EXPECT_FALSE(valid_adapter_name("x\x1b[31m"));
  EXPECT_FALSE(valid_adapter_name("x\x7f"));
  EXPECT_FALSE(valid_adapter_name("x\xc2\x85"));  // U+0085 NEXT LINE
  EXPECT_FALSE(valid_adapter_name("x\xff"));      // not UTF-8
}

}  // namespace
}  // namespace spate
