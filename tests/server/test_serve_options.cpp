// serve_options (server/serve_options.h): the API key file and the option
// checks that keep configured security from silently turning off.
#include "server/serve_options.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

namespace spate::cli {
namespace {

namespace fs = std::filesystem;
namespace po = boost::program_options;

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


// Every duration and count flag has a range; a value outside it (or NaN) is
// refused with a message naming the flag, the range and the value.
TEST(FinishServeOptions, DurationsOutsideTheirRangeAreRefused) {
  struct bound_case {
    double serve_options::*field;
    const char* flag;
    double bad;
  };
  const double not_a_number = std::numeric_limits<double>::quiet_NaN();
  const double infinite = std::numeric_limits<double>::infinity();
  const bound_case cases[] = {
      {&serve_options::sse_keepalive_s, "--sse-keepalive", 1e-300},  // 2.2 million comments in 120 s before
      {&serve_options::sse_keepalive_s, "--sse-keepalive", 0.001},
      {&serve_options::sse_keepalive_s, "--sse-keepalive", 86401},
      {&serve_options::sse_keepalive_s, "--sse-keepalive", not_a_number},
      {&serve_options::header_timeout_s, "--header-timeout", 1e-300},
      {&serve_options::body_timeout_s, "--body-timeout", infinite},
      {&serve_options::idle_timeout_s, "--idle-timeout", 0},
      {&serve_options::write_timeout_s, "--write-timeout", -1},
      {&serve_options::shutdown_timeout_s, "--shutdown-timeout", 1e300},
      {&serve_options::shutdown_timeout_s, "--shutdown-timeout", not_a_number},
      {&serve_options::model_load_timeout_s, "--model-load-timeout", 1e-300},
      {&serve_options::model_load_timeout_s, "--model-load-timeout", 1e10},
      {&serve_options::model_idle_unload_s, "--model-idle-unload", 1e10},
      {&serve_options::model_idle_unload_s, "--model-idle-unload", 1e300},
      {&serve_options::model_idle_unload_s, "--model-idle-unload", -1},
      {&serve_options::model_idle_unload_s, "--model-idle-unload", not_a_number},
  };
  for (const bound_case& c : cases) {
    serve_options o;
    o.*c.field = c.bad;
    const std::string err = finish_serve_options(o);
    EXPECT_NE(err.find(c.flag), std::string::npos) << c.flag << " " << c.bad << ": '" << err << "'";
    EXPECT_NE(err.find("must be in ["), std::string::npos) << err;
  }
  serve_options edges;
  edges.sse_keepalive_s = 0.01;
  edges.header_timeout_s = 86400;
  edges.shutdown_timeout_s = 0;
  edges.model_idle_unload_s = 1e9;
  edges.model_load_timeout_s = 0.01;
  EXPECT_EQ(finish_serve_options(edges), "");
}

TEST(FinishServeOptions, ConnectionsAndHostAreChecked) {
  serve_options many;
  many.max_connections = k_max_connections + 1;
  EXPECT_NE(finish_serve_options(many).find("--max-connections"), std::string::npos);
  for (const char* bad : {"not-an-ip", "", "127.0.0.1:8000", "256.1.1.1", "localhost"}) {
    serve_options o;
    o.host = bad;
    const std::string err = finish_serve_options(o);
    EXPECT_NE(err.find("--host"), std::string::npos) << "'" << bad << "': " << err;
  }
  for (const char* ok : {"0.0.0.0", "::1", "::", "127.0.0.2"}) {
    serve_options o;
    o.host = ok;
    EXPECT_EQ(finish_serve_options(o), "") << ok;
  }
}

// "" for a name or directory flag is a mistake, refused when the options are
// read (the exit code 2 path), never taken as "not given".
TEST(ServeOptions, EmptyNameAndDirectoryFlagsAreRefused) {
  for (const char* flag : {"--models-dir", "--served-model-name"}) {
    serve_options o;
    po::options_description desc;
    add_serve_options(desc, o);
    const char* argv[] = {"spate", flag, ""};
    po::variables_map vm;
    std::string err;
    try {
      po::store(po::parse_command_line(3, argv, desc), vm);
      po::notify(vm);
    } catch (const std::exception& e) {
      err = e.what();
    }
    EXPECT_NE(err.find(std::string(flag) + " must not be empty"), std::string::npos) << flag << ": '" << err << "'";
  }
  serve_options o;
  po::options_description desc;
  add_serve_options(desc, o);
  const char* argv[] = {"spate", "--models-dir=/models", "--served-model-name=m"};
  po::variables_map vm;
  po::store(po::parse_command_line(3, argv, desc), vm);
  EXPECT_NO_THROW(po::notify(vm));
  EXPECT_EQ(o.models_dir, "/models");
}

}  // namespace
}  // namespace spate::cli
