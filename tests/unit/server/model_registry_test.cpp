// The model registry's rules with a fake loader: lazy loads, names and aliases, LRU unloading
// under each budget, never unloading a leased model, loads that do not block other models.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <thread>

#include <unistd.h>

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

// Model names in requests never reach outside the configured models: path-shaped names are
// refused before the resolver sees them, and whatever a name resolves to must be the folder of
// a configured model (symlinks followed) or it is a 404.
TEST(ModelRegistry, RequestNamesNeverReachOutsideTheConfiguredModels) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("tachyon_traversal_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "models" / "a");
  fs::create_directories(root / "outside" / "secret");
  std::ofstream(root / "outside" / "secret" / "config.json") << "{}";
  fs::create_directory_symlink(root / "outside" / "secret", root / "models" / "link");
  fs::create_directory_symlink(root / "models" / "a", root / "models" / "link-to-a");

  std::vector<std::string> resolved;  // every name the resolver was asked about
  FakeLoader fake;
  ModelLoader loader = fake.loader();
  // As serve's resolver does for paths: a name that exists on disk is that path.
  loader.resolve = [&](const std::string& name) -> std::string {
    resolved.push_back(name);
    if (fs::exists(name)) return name;
    throw std::runtime_error("unknown");
  };
  ModelRegistry models({{"a", (root / "models" / "a").string()}}, loader, {});
  auto expect_404 = [&](const std::string& name) {
    try {
      models.acquire(name);
      ADD_FAILURE() << "no 404 for " << name;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 404) << name;
    }
  };
  const std::string outside = (root / "outside" / "secret").string();
  for (const std::string& name :
       {outside, std::string("../outside/secret"), (root / "models" / ".." / "outside" / "secret").string(),
        std::string("..%2F..%2Foutside%2Fsecret"), std::string("%2e%2e/outside"), std::string("~/outside"),
        std::string("./models/a"), std::string("a\\..\\..\\outside"), std::string("a\0../outside", 12),
        std::string("models/a\0", 9)}) {
    resolved.clear();
    expect_404(name);
    EXPECT_TRUE(resolved.empty()) << "the resolver saw a path-shaped name: " << name;
  }
  // A name that passes the gate and resolves through a symlink to a folder outside is a 404;
  // one resolving through a symlink to a configured model's folder picks that model.
  const fs::path cwd = fs::current_path();
  fs::current_path(root);
  expect_404("models/link");
  EXPECT_EQ(models.find("models/link-to-a").name, "a");
  fs::current_path(cwd);
  EXPECT_EQ(fake.loads.size(), 0u);  // nothing outside was ever loaded
  fs::remove_all(root);
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
