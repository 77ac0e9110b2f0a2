#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>

#include "util/regular_file.h"

namespace spate {
namespace {

namespace fs = std::filesystem;

class RegularFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spate-regular-file-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const char* name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// Runs f on another thread; fails the test (instead of hanging it) past 5 s.
template <class F>
auto within_5s(F f) {
  auto fut = std::async(std::launch::async, f);
  EXPECT_EQ(fut.wait_for(std::chrono::seconds(5)), std::future_status::ready) << "blocked";
  return fut.get();
}

TEST_F(RegularFile, OpensARegularFileInBlockingMode) {
  { std::ofstream(path("a.txt")) << "hello"; }
  regular_file f = open_regular_file(path("a.txt"));
  ASSERT_TRUE(f.fd) << f.error;
  EXPECT_EQ(f.error, "");
  EXPECT_EQ(f.size, 5u);
  EXPECT_GT(f.mtime_s, 0);
  EXPECT_EQ(::fcntl(f.fd.get(), F_GETFL) & O_NONBLOCK, 0);
  EXPECT_NE(::fcntl(f.fd.get(), F_GETFD) & FD_CLOEXEC, 0);
  std::string s;
  EXPECT_EQ(read_regular_file(path("a.txt"), s, 100), "");
  EXPECT_EQ(s, "hello");
}

TEST_F(RegularFile, RefusesAFifoWithoutBlocking) {
  ASSERT_EQ(::mkfifo(path("x.gguf").c_str(), 0600), 0);
  regular_file f = within_5s([&] { return open_regular_file(path("x.gguf")); });
  EXPECT_FALSE(f.fd);
  EXPECT_EQ(f.error, "is a FIFO, not a regular file");
  EXPECT_EQ(f.error_errno, 0);
  std::string s;
  EXPECT_EQ(within_5s([&] { return read_regular_file(path("x.gguf"), s, 100); }), "is a FIFO, not a regular file");
}

TEST_F(RegularFile, RefusesDirectoriesDevicesAndSockets) {
  EXPECT_EQ(open_regular_file(dir_.string()).error, "is a directory, not a regular file");
  std::string s;
  EXPECT_EQ(within_5s([&] { return read_regular_file("/dev/zero", s, 1 << 20); }), "is a character device, not a regular file");
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string p = path("s.sock");
  ASSERT_LT(p.size(), sizeof a.sun_path);
  std::memcpy(a.sun_path, p.c_str(), p.size() + 1);
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const regular_file f = open_regular_file(p);  // open(2) of a socket fails: ENXIO
  EXPECT_FALSE(f.fd);
  EXPECT_FALSE(f.error.empty());
  ::close(sock);
}

TEST_F(RegularFile, ReportsMissingFilesAndSymlinkLoops) {
  regular_file f = open_regular_file(path("none.gguf"));
  EXPECT_FALSE(f.fd);
  EXPECT_EQ(f.error_errno, ENOENT);
  EXPECT_EQ(f.error, std::strerror(ENOENT));
  fs::create_symlink(path("loop.gguf"), path("loop.gguf"));
  f = open_regular_file(path("loop.gguf"));
  EXPECT_FALSE(f.fd);
  EXPECT_EQ(f.error_errno, ELOOP);
}

TEST_F(RegularFile, FollowsSymlinksToRegularFilesOnly) {
  { std::ofstream(path("real.txt")) << "x"; }
  fs::create_symlink(path("real.txt"), path("link.txt"));
  EXPECT_TRUE(open_regular_file(path("link.txt")).fd);
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  fs::create_symlink(path("fifo"), path("fifo-link.gguf"));
  EXPECT_EQ(within_5s([&] { return open_regular_file(path("fifo-link.gguf")); }).error, "is a FIFO, not a regular file");
}

TEST_F(RegularFile, ReadRefusesFilesAboveTheBound) {
  { std::ofstream(path("big.txt")) << std::string(101, 'x'); }
  std::string s;
  EXPECT_EQ(read_regular_file(path("big.txt"), s, 100), "is larger than 100 bytes");
  EXPECT_EQ(read_regular_file(path("big.txt"), s, 101), "");
  EXPECT_EQ(s.size(), 101u);
}

TEST(UniqueFd, ClosesOnDestructionAndMove) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  {
    unique_fd a(fds[0]);
    unique_fd b(std::move(a));
    EXPECT_FALSE(a);
    EXPECT_EQ(b.get(), fds[0]);
  }
  EXPECT_EQ(::fcntl(fds[0], F_GETFD), -1);  // closed
  ::close(fds[1]);
}

}  // namespace
}  // namespace spate
