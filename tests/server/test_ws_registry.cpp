// ws_registry (server/ws_registry.h): the drain tells every open WebSocket
// once, counts it until it closes, and a connection that enters after the
// drain began is late (refused) rather than missed.
#include "server/ws_registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

namespace spate {
namespace {

TEST(WsRegistry, TheDrainTellsEveryOpenConnectionOnceAndCountsItUntilItCloses) {
  ws_registry reg;
  std::vector<int> told;
  auto a = reg.enter([&] { told.push_back(1); });
  auto b = reg.enter([&] { told.push_back(2); });
  {
    auto gone = reg.enter([&] { told.push_back(3); });
  }
  EXPECT_EQ(reg.open(), 2);
  EXPECT_FALSE(a->late());
  reg.begin_drain();
  reg.begin_drain();  // idempotent: nobody is told twice
  EXPECT_EQ(told, (std::vector<int>{1, 2}));
  EXPECT_EQ(reg.open(), 2);  // told, still open: the drain waits
  a.reset();
  EXPECT_EQ(reg.open(), 1);
  b.reset();
  EXPECT_EQ(reg.open(), 0);
}

TEST(WsRegistry, AConnectionEnteringAfterTheDrainBeganIsLateAndCounted) {
  ws_registry reg;
  reg.begin_drain();
  bool told = false;
  auto late = reg.enter([&] { told = true; });
  EXPECT_TRUE(late->late());
  EXPECT_EQ(reg.open(), 1);  // the drain waits for its 503 to be written
  reg.begin_drain();
  EXPECT_FALSE(told);
  late.reset();
  EXPECT_EQ(reg.open(), 0);
}

// Connections entering on other threads while the drain begins: each one is
// either told or late, never neither (the guarantee the drain relies on).
TEST(WsRegistry, EveryConnectionRacingTheDrainIsToldOrLate) {
  for (int round = 0; round < 50; ++round) {
    ws_registry reg;
    constexpr int k_threads = 4, k_each = 50;
    std::atomic<int> told{0}, late{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    std::vector<std::vector<std::unique_ptr<ws_registry::ticket>>> held(k_threads);
    for (int t = 0; t < k_threads; ++t) {
      threads.emplace_back([&, t] {
        while (!go.load()) {
        }
        for (int i = 0; i < k_each; ++i) {
          auto tk = reg.enter([&] { told.fetch_add(1); });
          if (tk->late()) late.fetch_add(1);
          held[t].push_back(std::move(tk));
        }
      });
    }
    go = true;
    reg.begin_drain();
    for (auto& th : threads) th.join();
    EXPECT_EQ(told.load() + late.load(), k_threads * k_each) << "round " << round;
    EXPECT_EQ(reg.open(), k_threads * k_each);
  }
}

}  // namespace
}  // namespace spate
