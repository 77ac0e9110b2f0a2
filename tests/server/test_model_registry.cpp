// The model registry's logic (server/model_registry.h) over a fake loader (no
// weights, no engine): on-demand loads, the LRU limit, draining a busy model,
// idle unloads, pinned models, errors, the waiter bound, adapters over a base.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include "server/metrics.h"
#include "server/model_registry.h"

namespace spate {
namespace {

using namespace std::chrono_literals;

// A loaded fake: adapters install by name; "broken" paths fail.
struct fake_model final : serving_model {
  std::map<std::string, lora_slot> adapters;
  mutable std::mutex mu;
  void install_adapter(const std::string& name, const std::string& path) override {
    if (path.find("bad") != std::string::npos) throw std::runtime_error("tensor 'blk.0.attn_k.weight' does not fit");
    std::lock_guard l(mu);
    const auto n = adapters.size();
    adapters[name] = lora_slot{static_cast<int32_t>(n), 100 + n};
  }
  void remove_adapter(const std::string& name) override {
    std::lock_guard l(mu);
    adapters.erase(name);
  }
  std::optional<lora_slot> adapter(const std::string& name) const override {
    std::lock_guard l(mu);
    auto it = adapters.find(name);
    if (it == adapters.end()) return std::nullopt;
    return it->second;
  }
};

model_spec spec(std::string id, bool pinned = false, std::string parent = "") {
  model_spec s;
  s.id = id;
  s.path = "/models/" + id + ".gguf";
  s.pinned = pinned;
  s.parent = std::move(parent);
  return s;
}

// Collects the outcome of a queued acquire.
struct waiter {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<model_acquired> got;
  model_acquired_fn fn() {
    return [this](model_acquired a) {
      std::lock_guard l(mu);
      got = std::move(a);
      cv.notify_all();
    };
  }
  model_acquired wait() {
    std::unique_lock l(mu);
    EXPECT_TRUE(cv.wait_for(l, 10s, [&] { return got.has_value(); })) << "no outcome within 10 s";
    return std::move(*got);
  }
};

struct fixture {
  explicit fixture(std::vector<model_spec> specs, registry_options o = {})
      : registry(std::move(specs), [this](const model_spec& s) -> std::unique_ptr<serving_model> {
          ++n_loads;
          if (s.path.find("broken") != std::string::npos) throw std::runtime_error("invalid GGUF file");
          auto m = std::make_unique<fake_model>();
          m->info.name = s.id;
          m->max_loras = 2;
          m->memory_bytes = s.memory_bytes;
          return m;
        }, o) {
    registry.start();
  }
  model_handle get(const std::string& id) {
    waiter w;
    auto now = registry.acquire(id, w.fn());
    model_acquired a = now ? std::move(*now) : w.wait();
    EXPECT_TRUE(a.lease) << id << ": " << (a.error ? a.error->message : "");
    return a.lease;
  }
  model_status status(const std::string& id) { return registry.find(id)->status; }
  std::atomic<int> n_loads{0};
  model_registry registry;
};

bool eventually(const std::function<bool()>& f) {
  for (int i = 0; i < 1000; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return f();
}

TEST(ModelRegistry, LoadsOnDemandAndServesFromMemoryAfterwards) {
  fixture f({spec("a"), spec("b")});
  EXPECT_EQ(f.status("a"), model_status::unloaded);
  auto l = f.get("a");
  EXPECT_EQ(l->id(), "a");
  EXPECT_EQ(l->model().name, "a");
  EXPECT_EQ(f.status("a"), model_status::loaded);
  auto again = f.registry.acquire("a", [](model_acquired) { FAIL() << "a loaded model is handed out at once"; });
  ASSERT_TRUE(again && again->lease);
  EXPECT_EQ(f.n_loads.load(), 1);
}

TEST(ModelRegistry, UnknownModelIs404AndDefaultIsTheFirstServable) {
  fixture f({spec("x-broken"), spec("a"), spec("b")});
  auto r = f.registry.acquire("nope", nullptr);
  ASSERT_TRUE(r && r->error);
  EXPECT_EQ(r->error->status, 404);
  EXPECT_EQ(r->error->code, "model_not_found");
  EXPECT_EQ(f.registry.default_id(), "x-broken");  // no spec error known up front: the first listed
  fixture g({spec("a"), spec("p", true)});
  EXPECT_EQ(g.registry.default_id(), "p");
}

TEST(ModelRegistry, TheOnlyModelAnswersAnyNameUnlessStrict) {
  fixture f({spec("only")});
  for (const char* name : {"dummy", "tgi", "Only", "org/other model"}) {
    model_handle l = f.get(name);
    ASSERT_TRUE(l) << name;
    EXPECT_EQ(l->id(), "only") << "the answer names the served model";
    EXPECT_EQ(l->model().name, "only");
  }
  EXPECT_EQ(f.n_loads.load(), 1);
  // Management routes keep exact names.
  EXPECT_FALSE(f.registry.find("dummy"));
  auto ld = f.registry.load("dummy", nullptr);
  ASSERT_TRUE(ld && ld->error);
  EXPECT_EQ(ld->error->status, 404);

  registry_options strict;
  strict.strict_model_names = true;
  fixture s({spec("only")}, strict);
  auto r = s.registry.acquire("dummy", nullptr);
  ASSERT_TRUE(r && r->error);
  EXPECT_EQ(r->error->status, 404);
  EXPECT_EQ(r->error->code, "model_not_found");
  EXPECT_TRUE(s.get("only"));

  // Two models, or a model with an adapter: names must match.
  fixture two({spec("a"), spec("b")});
  r = two.registry.acquire("dummy", nullptr);
  ASSERT_TRUE(r && r->error);
  EXPECT_EQ(r->error->status, 404);
  fixture with_adapter({spec("base"), spec("ad", false, "base")});
  r = with_adapter.registry.acquire("dummy", nullptr);
  ASSERT_TRUE(r && r->error);
  EXPECT_EQ(r->error->status, 404);
}

TEST(ModelRegistry, ABrokenModelFailsItsRequestsOnly) {
  fixture f({spec("broken"), spec("a")});
  waiter w;
  auto now = f.registry.acquire("broken", w.fn());
  model_acquired r = now ? std::move(*now) : w.wait();
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->status, 500);
  EXPECT_EQ(r.error->code, "model_load_failed");
  EXPECT_NE(r.error->message.find("invalid GGUF"), std::string::npos);
  EXPECT_EQ(f.status("broken"), model_status::error);
  EXPECT_TRUE(f.get("a"));
  // Requests fail fast afterwards; an explicit load retries.
  auto again = f.registry.acquire("broken", nullptr);
  ASSERT_TRUE(again && again->error);
  waiter w2;
  auto retried = f.registry.load("broken", w2.fn());
  EXPECT_FALSE(retried);  // queued again
  EXPECT_TRUE(w2.wait().error);
  EXPECT_EQ(f.n_loads.load(), 3);
}

TEST(ModelRegistry, LimitUnloadsTheLeastRecentlyUsedIdleModel) {
  registry_options o;
  o.max_loaded_models = 2;
  fixture f({spec("a"), spec("b"), spec("c")}, o);
  f.get("a");
  f.get("b");
  f.get("a");  // b is now the least recently used
  f.get("c");
  EXPECT_EQ(f.status("a"), model_status::loaded);
  EXPECT_EQ(f.status("b"), model_status::unloaded);
  EXPECT_EQ(f.status("c"), model_status::loaded);
}

TEST(ModelRegistry, ABusyModelDrainsBeforeItUnloads) {
  registry_options o;
  o.max_loaded_models = 1;
  fixture f({spec("a"), spec("b")}, o);
  model_handle a = f.get("a");
  waiter wb;
  ASSERT_FALSE(f.registry.acquire("b", wb.fn()));  // needs a's room: a drains
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(f.status("a"), model_status::loaded);  // its request still runs
  EXPECT_FALSE(wb.got.has_value());
  // New requests for a draining model wait for its next load (fair turns).
  waiter wa;
  EXPECT_FALSE(f.registry.acquire("a", wa.fn()));
  a.reset();  // the request finishes: a unloads, b loads, then a again once b is idle
  model_acquired b = wb.wait();
  ASSERT_TRUE(b.lease);
  EXPECT_EQ(f.status("a"), model_status::unloaded);
  b.lease.reset();
  ASSERT_TRUE(wa.wait().lease);
  EXPECT_EQ(f.status("b"), model_status::unloaded);
}

TEST(ModelRegistry, PinnedModelsNeverUnloadAndBlockWhenAllRoomIsPinned) {
  registry_options o;
  o.max_loaded_models = 1;
  o.idle_unload_s = 0.05;
  fixture f({spec("p", true), spec("a")}, o);
  f.registry.load_blocking("p");
  EXPECT_TRUE(f.registry.pinned_loaded());
  waiter w;
  EXPECT_FALSE(f.registry.acquire("a", w.fn()));
  model_acquired r = w.wait();
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->status, 503);
  EXPECT_NE(r.error->message.find("pinned"), std::string::npos);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(f.status("p"), model_status::loaded);
  auto u = f.registry.unload("p");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->status, 400);
}

TEST(ModelRegistry, IdleModelsUnloadAfterTheTimeout) {
  registry_options o;
  o.idle_unload_s = 0.1;
  fixture f({spec("a")}, o);
  { model_handle a = f.get("a"); std::this_thread::sleep_for(250ms); EXPECT_EQ(f.status("a"), model_status::loaded); }
  EXPECT_TRUE(eventually([&] { return f.status("a") == model_status::unloaded; }));
}

TEST(ModelRegistry, KeepAliveReplacesTheIdleTimeoutPerModel) {
  registry_options o;
  o.idle_unload_s = 0;  // never, unless a request's keep_alive says otherwise
  fixture f({spec("a"), spec("b"), spec("c")}, o);
  f.registry.set_keep_alive("a", 0.1);
  f.registry.set_keep_alive("b", -1);  // forever
  { model_handle a = f.get("a"), b = f.get("b"), c = f.get("c"); }
  EXPECT_TRUE(eventually([&] { return f.status("a") == model_status::unloaded; }));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(f.status("b"), model_status::loaded);
  EXPECT_EQ(f.status("c"), model_status::loaded);
  f.registry.set_keep_alive("c", 0);  // unload now
  EXPECT_TRUE(eventually([&] { return f.status("c") == model_status::unloaded; }));
  f.registry.set_keep_alive("nope", 1);  // unknown: ignored
}

TEST(ModelRegistry, IdleUnloadDueNeverOverflows) {
  const auto now = std::chrono::steady_clock::now();
  EXPECT_FALSE(idle_unload_due(now, 0));
  EXPECT_FALSE(idle_unload_due(now, -1));
  EXPECT_FALSE(idle_unload_due(now, std::numeric_limits<double>::quiet_NaN()));
  for (double huge : {1e10, 1e11, 1e300, std::numeric_limits<double>::infinity()}) {
    const auto due = idle_unload_due(now, huge);  // beyond the clock (about 292 years of ns): never, not the past
    EXPECT_TRUE(!due || *due > now) << huge;
  }
  EXPECT_FALSE(idle_unload_due(now, 1e300));
  const auto due = idle_unload_due(now, 1e9);
  ASSERT_TRUE(due);
  EXPECT_NEAR(std::chrono::duration<double>(*due - now).count(), 1e9, 1.0);
  ASSERT_TRUE(idle_unload_due(now, 0.5));
  EXPECT_EQ(*idle_unload_due(now, 0.5) - now, std::chrono::milliseconds(500));
}

// A keep_alive beyond the clock's range (Ollama's 1e300) used to overflow into
// the past: the registry thread spun at a full core holding the lock. Now the
// model simply stays loaded and the thread sleeps.
TEST(ModelRegistry, AHugeKeepAliveKeepsTheModelWithoutSpinning) {
  fixture f({spec("a"), spec("b")});
  for (double huge : {1e300, 1e10, std::numeric_limits<double>::infinity()}) {
    f.registry.set_keep_alive("a", huge);
    { model_handle a = f.get("a"); }
    timespec t0{}, t1{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    std::this_thread::sleep_for(300ms);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    const double cpu_s = static_cast<double>(t1.tv_sec - t0.tv_sec) + static_cast<double>(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    EXPECT_LT(cpu_s, 0.1) << huge << ": the registry thread used " << cpu_s << " s of CPU in 0.3 s idle";
    EXPECT_EQ(f.status("a"), model_status::loaded) << huge;
    const auto t_get = std::chrono::steady_clock::now();
    { model_handle b = f.get("b"); }  // others are served at once
    EXPECT_LT(std::chrono::steady_clock::now() - t_get, 2s);
  }
}

TEST(ModelRegistry, UnloadRouteWaitsForRunningRequests) {
  fixture f({spec("a")});
  model_handle a = f.get("a");
  EXPECT_FALSE(f.registry.unload("a"));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(f.status("a"), model_status::loaded);
  a.reset();
  EXPECT_TRUE(eventually([&] { return f.status("a") == model_status::unloaded; }));
  auto again = f.registry.unload("a");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->code, "model_not_loaded");
}

TEST(ModelRegistry, MemoryBudgetCountsWeightsAndKv) {
  registry_options o;
  o.memory_budget_bytes = 250;
  std::vector<model_spec> specs = {spec("a"), spec("b"), spec("c")};
  for (auto& s : specs) s.memory_bytes = 100;
  fixture f(specs, o);
  f.get("a");
  f.get("b");  // 200 of 250
  f.get("c");  // 300 would not fit: a, the least recently used, goes
  EXPECT_EQ(f.status("a"), model_status::unloaded);
  EXPECT_EQ(f.status("b"), model_status::loaded);
  EXPECT_EQ(f.status("c"), model_status::loaded);
  f.get("a");
  EXPECT_EQ(f.status("b"), model_status::unloaded);
}

TEST(ModelRegistry, WaitersAreBounded) {
  registry_options o;
  o.max_loaded_models = 1;
  o.max_waiting = 2;
  fixture f({spec("a"), spec("b")}, o);
  model_handle a = f.get("a");  // b cannot load while a runs
  waiter w1, w2;
  EXPECT_FALSE(f.registry.acquire("b", w1.fn()));
  EXPECT_FALSE(f.registry.acquire("b", w2.fn()));
  auto third = f.registry.acquire("b", nullptr);
  ASSERT_TRUE(third && third->error);
  EXPECT_EQ(third->error->status, 429);
  a.reset();
  EXPECT_TRUE(w1.wait().lease);
  EXPECT_TRUE(w2.wait().lease);
}

TEST(ModelRegistry, AdaptersLeaseTheirBaseAndInstallOnDemand) {
  registry_options o;
  o.max_loaded_models = 1;
  fixture f({spec("base"), spec("other"), spec("ad", false, "base")}, o);
  model_handle l = f.get("ad");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->id(), "ad");
  EXPECT_EQ(l->model().name, "ad");
  EXPECT_EQ(l->adapter_slot(), 0);
  EXPECT_EQ(l->cache_salt(), 100u);
  EXPECT_EQ(f.status("base"), model_status::loaded);
  EXPECT_EQ(f.status("ad"), model_status::loaded);
  // The adapter's lease keeps its base loaded.
  waiter w;
  EXPECT_FALSE(f.registry.acquire("other", w.fn()));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(f.status("base"), model_status::loaded);
  l.reset();
  EXPECT_TRUE(w.wait().lease);
  EXPECT_EQ(f.status("ad"), model_status::unloaded);
}

TEST(ModelRegistry, AddAndRemoveAdapters) {
  fixture f({spec("base")});
  std::mutex mu;
  std::condition_variable cv;
  std::optional<std::optional<api::api_error>> done;
  auto on_done = [&](std::optional<api::api_error> e) {
    std::lock_guard l(mu);
    done = std::move(e);
    cv.notify_all();
  };
  auto wait_done = [&] {
    std::unique_lock l(mu);
    EXPECT_TRUE(cv.wait_for(l, 10s, [&] { return done.has_value(); }));
    auto r = std::move(*done);
    done.reset();
    return r;
  };
  model_spec bad = spec("bad", false, "");
  bad.path = "/adapters/bad.gguf";
  ASSERT_FALSE(f.registry.add_adapter(bad, on_done));
  auto e = wait_done();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 400);
  EXPECT_NE(e->message.find("blk.0.attn_k.weight"), std::string::npos);
  EXPECT_FALSE(f.registry.find("bad"));  // a failed load is not kept
  ASSERT_FALSE(f.registry.add_adapter(spec("good"), on_done));
  EXPECT_FALSE(wait_done());
  EXPECT_EQ(f.registry.find("good")->spec.parent, "base");
  auto dup = f.registry.add_adapter(spec("good"), on_done);
  ASSERT_TRUE(dup);
  EXPECT_EQ(dup->status, 400);
  model_handle g = f.get("good");
  EXPECT_FALSE(f.registry.remove_adapter("good"));
  EXPECT_FALSE(f.registry.find("good"));
  auto gone = f.registry.acquire("good", nullptr);
  ASSERT_TRUE(gone && gone->error);
  EXPECT_EQ(gone->error->status, 404);
  EXPECT_EQ(f.registry.remove_adapter("good")->status, 404);
  g.reset();  // the slot is freed once the last request is gone
}

}  // namespace
}  // namespace spate
