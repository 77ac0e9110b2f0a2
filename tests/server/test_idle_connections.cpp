// idle_connections (server/idle_connections.h): the oldest idle keep-alive
// connection is the one closed; a wait that ended is never touched.
#include "server/idle_connections.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <vector>

namespace spate {
namespace {

TEST(IdleConnections, ClosesTheOldestFirst) {
  idle_connections reg;
  std::vector<int> closed;
  const uint64_t a = reg.add([&] { closed.push_back(1); });
  reg.add([&] { closed.push_back(2); });
  reg.add([&] { closed.push_back(3); });
  EXPECT_EQ(reg.size(), 3u);
  reg.remove(a);
  EXPECT_TRUE(reg.close_oldest());
  EXPECT_TRUE(reg.close_oldest());
  EXPECT_FALSE(reg.close_oldest());
  EXPECT_EQ(closed, (std::vector<int>{2, 3}));
  EXPECT_EQ(reg.size(), 0u);
}

TEST(IdleConnections, RegistrationCancelsThePendingReadOnItsStrand) {
  boost::asio::io_context io;
  auto strand = boost::asio::make_strand(io);
  boost::asio::ip::tcp::acceptor acc(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  boost::asio::ip::tcp::socket client(io), server(strand);
  client.connect(acc.local_endpoint());
  acc.accept(server);
  idle_connections reg;
  boost::system::error_code read_ec;
  bool evicted = false;
  {
    auto reg_entry = std::make_unique<idle_registration>(reg, strand, server);
    char c;
    server.async_read_some(boost::asio::buffer(&c, 1), [&](boost::system::error_code ec, size_t) {
      read_ec = ec;
      evicted = reg_entry->evicted();
      reg_entry.reset();  // the wait ended: unregistered
    });
    EXPECT_EQ(reg.size(), 1u);
    EXPECT_TRUE(reg.close_oldest());
    io.run();
  }
  EXPECT_EQ(read_ec, boost::asio::error::operation_aborted);
  EXPECT_TRUE(evicted);
  EXPECT_EQ(reg.size(), 0u);
}

TEST(IdleConnections, AnEndedWaitIsNotTouched) {
  boost::asio::io_context io;
  auto strand = boost::asio::make_strand(io);
  idle_connections reg;
  {
    auto sock = std::make_unique<boost::asio::ip::tcp::socket>(strand);
    idle_registration r(reg, strand, *sock);
    // Taken out of the registry, then the wait ends before the posted close runs.
    EXPECT_TRUE(reg.close_oldest());
  }
  io.run();  // the posted close finds the wait over and does nothing (ASan would see a use after free)
  SUCCEED();
}

}  // namespace
}  // namespace spate
