// The model registry's rules with a fake loader: lazy loads, names and aliases, LRU unloading
// under each budget, never unloading a leased model, loads that do not block other models.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <thread>

#include "server/api_error.h"
#include "server/model_registry.h"

namespace tachyon::server {
namespace {

struct FakeLoader {
  std::map<std::string, int64_t> footprint;  // by name; 10 when absent
  std::map<std::string, int> loads;
  std::mutex mu;
  std::function<void(const std::string&)> during_load;  // runs inside load(), outside any registry lock

  ModelLoader loader() {
    ModelLoader l;
    l.load = [this](const ModelEntry& e) {
      if (during_load) during_load(e.name);
      std::lock_guard lock(mu);
      ++loads[e.name];
      auto m = std::make_shared<ServedModel>();
      m->id = e.name;
      return std::shared_ptr<const ServedModel>(m);
    };
    l.footprint = [this](const ModelEntry& e) {
      auto it = footprint.find(e.name);
      return it == footprint.end() ? int64_t{10} : it->second;
    };
    l.resolve = [](const std::string& name) -> std::string {
      if (name == "alias-of-b") return "/models/b";
      throw std::runtime_error("unknown");
    };
    return l;
  }
};

std::vector<ModelEntry> abc() { return {{"a", "/models/a"}, {"b", "/models/b"}, {"c", "/models/c"}}; }

TEST(ModelRegistry, LoadsOnFirstUseAndOnlyOnce) {
  FakeLoader fake;
  ModelRegistry models(abc(), fake.loader(), {});
  EXPECT_TRUE(models.loaded_names().empty());
  EXPECT_EQ(models.acquire("b")->id, "b");
  EXPECT_EQ(models.acquire("b")->id, "b");
  EXPECT_EQ(fake.loads["b"], 1);
  EXPECT_EQ(models.loaded_names(), std::vector<std::string>{"b"});
  EXPECT_EQ(models.counts().loads, 1);
}

TEST(ModelRegistry, FindsByNameTagAliasAndDefault) {
  FakeLoader fake;
  ModelRegistry models(abc(), fake.loader(), {});
  EXPECT_EQ(models.find("c").name, "c");
  EXPECT_EQ(models.find("c:latest").name, "c");    // Ollama's tag
  EXPECT_EQ(models.find("alias-of-b").name, "b");  // resolves to b's folder
  EXPECT_EQ(models.find("").name, "a");            // no model named: the first
  try {
    models.find("nope");
    FAIL() << "no 404";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 404);
    EXPECT_NE(std::string(e.what()).find("'a', 'b', 'c'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(models.loaded_names().empty());  // finding loads nothing
}

TEST(ModelRegistry, MaxLoadedUnloadsLeastRecentlyUsed) {
  FakeLoader fake;
  ModelRegistry models(abc(), fake.loader(), {.max_loaded = 2});
  models.acquire("a");
  models.acquire("b");
  models.acquire("a");  // b is now the least recently used
  models.acquire("c");
  EXPECT_EQ(models.loaded_names(), (std::vector<std::string>{"c", "a"}));
  models.acquire("b");
  EXPECT_EQ(models.loaded_names(), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(models.counts().unloads, 2);
  EXPECT_EQ(fake.loads["b"], 2);
}

TEST(ModelRegistry, LeasedModelIsNeverUnloaded) {
  FakeLoader fake;
  ModelRegistry models(abc(), fake.loader(), {.max_loaded = 1});
  ModelRegistry::Lease a = models.acquire("a");
  ModelRegistry::Lease b = models.acquire("b");  // over the limit: a is busy, so both stay
  EXPECT_EQ(models.counts().loaded, 2);
  EXPECT_EQ(a->id, "a");
  a.reset();
  models.acquire("c");  // a is idle and least recently used; b is still leased
  EXPECT_EQ(models.loaded_names(), (std::vector<std::string>{"c", "b"}));
  b.reset();
  models.acquire("a");
  EXPECT_EQ(models.loaded_names(), std::vector<std::string>{"a"});
}

TEST(ModelRegistry, ByteBudgetUnloadsUntilTheNextFits) {
  FakeLoader fake;
  fake.footprint = {{"a", 40}, {"b", 40}, {"c", 70}};
  ModelRegistry models(abc(), fake.loader(), {.max_bytes = 100});
  models.acquire("a");
  models.acquire("b");
  EXPECT_EQ(models.counts().loaded_bytes, 80);
  models.acquire("c");  // 150 > 100, 110 > 100: both go
  EXPECT_EQ(models.loaded_names(), std::vector<std::string>{"c"});
  EXPECT_EQ(models.counts().loaded_bytes, 70);
}

TEST(ModelRegistry, DefaultBudgetIsFreeMemory) {
  FakeLoader fake;
  fake.footprint = {{"a", 40}, {"b", 40}, {"c", 40}};
  std::atomic<int64_t> free_bytes{100};
  ModelRegistry models(abc(), fake.loader(), {.free_bytes = [&] { return free_bytes.load(); }});
  models.acquire("a");
  models.acquire("b");  // 100 free holds it
  EXPECT_EQ(models.counts().loaded, 2);
  free_bytes = 30;      // c needs 40: the least recently used (a) goes
  models.acquire("c");
  EXPECT_EQ(models.loaded_names(), (std::vector<std::string>{"c", "b"}));
}

TEST(ModelRegistry, FailedLoadIsRetried) {
  FakeLoader fake;
  bool fail = true;
  fake.during_load = [&](const std::string&) {
    if (fail) throw std::runtime_error("bad checkpoint");
  };
  ModelRegistry models(abc(), fake.loader(), {});
  try {
    models.acquire("a");
    FAIL() << "loaded";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 500);
    EXPECT_NE(std::string(e.what()).find("bad checkpoint"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(models.loaded_names().empty());
  fail = false;
  EXPECT_EQ(models.acquire("a")->id, "a");
}

TEST(ModelRegistry, LoadingOneModelBlocksNeitherOthersNorLoadsTwice) {
  FakeLoader fake;
  ModelRegistry models(abc(), fake.loader(), {});
  models.acquire("a");
  std::promise<void> entered, finish;
  std::shared_future<void> finish_f = finish.get_future().share();
  fake.during_load = [&](const std::string& name) {
    if (name != "b") return;
    entered.set_value();
    finish_f.wait();
  };
  auto first = std::async(std::launch::async, [&] { return models.acquire("b")->id; });
  entered.get_future().wait();
  EXPECT_EQ(models.acquire("a")->id, "a");  // served while b loads
  auto second = std::async(std::launch::async, [&] { return models.acquire("b")->id; });
  EXPECT_EQ(second.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);  // waits for that load
  finish.set_value();
  EXPECT_EQ(first.get(), "b");
  EXPECT_EQ(second.get(), "b");
  EXPECT_EQ(fake.loads["b"], 1);
}

}  // namespace
}  // namespace tachyon::server
