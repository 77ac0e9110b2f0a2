// serve_options (server/serve_options.h): the API key file and the option
// checks that keep configured security from silently turning off.
#include "server/serve_options.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace spate::cli {
namespace {

namespace fs = std::filesystem;

class ApiKeyFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spate-keys-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    opts_.api_key_file = (dir_ / "keys").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& text) { std::ofstream(opts_.api_key_file, std::ios::binary) << text; }
  std::string error_of() {
    try {
      load_api_keys(opts_);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
  serve_options opts_;
};

TEST_F(ApiKeyFile, KeysCommentsAndBlanks) {
  write("# keys\n\n  key-a  \r\nkey-b\n");
  EXPECT_EQ(load_api_keys(opts_), (std::vector<std::string>{"key-a", "key-b"}));
  opts_.api_keys = {"flag-key"};
  EXPECT_EQ(load_api_keys(opts_), (std::vector<std::string>{"flag-key", "key-a", "key-b"}));
}

TEST_F(ApiKeyFile, AFileWithoutKeysIsRefusedNeverNoAuth) {
  for (const char* text : {"", "\n\n", "# only a comment\n", "   \t \r\n# x\n", "#key\n"}) {
    write(text);
    const std::string err = error_of();
    EXPECT_NE(err.find("holds no API key"), std::string::npos) << "'" << text << "': " << err;
    EXPECT_NE(err.find(opts_.api_key_file), std::string::npos) << "names the file";
    // --api-key keys do not make an empty key file acceptable: it is a mistake either way.
    opts_.api_keys = {"flag-key"};
    EXPECT_NE(error_of().find("holds no API key"), std::string::npos);
    opts_.api_keys.clear();
  }
}

TEST_F(ApiKeyFile, ADirectoryOrAMissingFileIsRefused) {
  fs::create_directories(opts_.api_key_file);
  EXPECT_NE(error_of().find("is a directory"), std::string::npos);
  fs::remove(opts_.api_key_file);
  EXPECT_NE(error_of().find("cannot be read"), std::string::npos);
}

TEST_F(ApiKeyFile, AFifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo(opts_.api_key_file.c_str(), 0600), 0);
  EXPECT_NE(error_of().find("cannot be read: is a FIFO, not a regular file"), std::string::npos);  // used to block in open(2)
}

TEST(FinishServeOptions, RuntimeLoraLoadingNeedsAllowedDirectories) {
  serve_options o;
  EXPECT_EQ(finish_serve_options(o), "");
  EXPECT_FALSE(o.enable_lora_runtime_loading) << "off by default";
  o.enable_lora_runtime_loading = true;
  EXPECT_NE(finish_serve_options(o).find("--enable-lora-runtime-loading needs --lora-allowed-dirs"), std::string::npos);
  const fs::path tmp = fs::canonical(fs::temp_directory_path());
  o.lora_allowed_dirs = {tmp.string()};
  EXPECT_EQ(finish_serve_options(o), "");
  EXPECT_EQ(o.lora_allowed_roots, std::vector<std::string>{tmp.string()});
  o.lora_allowed_dirs = {(tmp / "spate-no-such-dir").string()};
  EXPECT_NE(finish_serve_options(o).find("--lora-allowed-dirs"), std::string::npos);
}

TEST_F(ApiKeyFile, NonPrintableKeysAreRefused) {
  write("good\nbad\x01key\n");
  EXPECT_NE(error_of().find("line 2"), std::string::npos);
}

TEST(FinishServeOptions, CredentialsWithAnyOriginAreRefused) {
  serve_options o;
  o.allow_credentials = true;
  const std::string err = finish_serve_options(o);
  EXPECT_NE(err.find("--allow-credentials"), std::string::npos) << err;
  EXPECT_NE(err.find("--allowed-origins"), std::string::npos) << err;
  serve_options listed;
  listed.allow_credentials = true;
  listed.allowed_origins_json = R"(["https://app.example"])";
  EXPECT_EQ(finish_serve_options(listed), "");
  EXPECT_TRUE(listed.cors.allow_credentials);
  serve_options mixed;
  mixed.allow_credentials = true;
  mixed.allowed_origins_json = R"(["https://app.example", "*"])";
  EXPECT_NE(finish_serve_options(mixed), "");
  serve_options no_creds;
  EXPECT_EQ(finish_serve_options(no_creds), "") << "\"*\" without credentials stays the default";
}

TEST(FinishServeOptions, DefaultCiphersAreEcdheWithAeadOnly) {
  serve_options o;
  EXPECT_EQ(finish_serve_options(o), "");
  for (const char* weak : {"CBC", "SHA:", "DHE-RSA", "AES128-SHA256", "RSA-AES"}) {
    EXPECT_EQ(o.ssl_ciphers.find(std::string(":") + weak), std::string::npos) << weak;
  }
  size_t n = 0;
  for (size_t at = 0; at != std::string::npos; at = o.ssl_ciphers.find(':', at + 1)) {
    const std::string_view suite = std::string_view(o.ssl_ciphers).substr(at == 0 ? 0 : at + 1);
    EXPECT_TRUE(suite.starts_with("ECDHE-")) << suite;
    ++n;
  }
  EXPECT_EQ(n, 6u);
  o.ssl_ciphers.clear();
  EXPECT_NE(finish_serve_options(o), "");
}


TEST(FinishServeOptions, JsonWhitespaceIsBoundedOrCompact) {
  for (const char* ok : {"bounded", "compact"}) {
    serve_options o;
    o.json_whitespace = ok;
    EXPECT_EQ(finish_serve_options(o), "") << ok;
  }
  serve_options bad;
  bad.json_whitespace = "any";
  EXPECT_NE(finish_serve_options(bad).find("--json-whitespace"), std::string::npos);
}

TEST(ServeOptions, ReasoningParserNames) {
  for (const char* name : {"", "qwen3", "deepseek_r1", "openai_gptoss", "none"}) {
    serve_options o;
    o.reasoning_parser = name;
    EXPECT_EQ(finish_serve_options(o), "") << name;
  }
  serve_options o;
  o.reasoning_parser = "deepseek-r1";
  EXPECT_EQ(finish_serve_options(o), "--reasoning-parser must be one of qwen3, deepseek_r1, openai_gptoss, none; got 'deepseek-r1'");
  o.reasoning_parser = "";
  o.tool_call_parser = "openai";
  EXPECT_EQ(finish_serve_options(o), "");
}

}  // namespace
}  // namespace spate::cli
