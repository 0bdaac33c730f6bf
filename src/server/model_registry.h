// The models one server serves, by name: each built on first use, kept while the memory budget
// allows, unloaded least recently used when loading another would exceed it, never while a
// request holds it.
//
//   ModelRegistry models({{"qwen3", "/m/qwen3"}, {"demo", "/m/demo"}}, loader, {.max_loaded = 1});
//   ModelRegistry::Lease m = models.acquire("qwen3");  // loads it (outside the lock); 404 ApiError if unknown
//   Generation gen(*m, request, admission);            // the model stays loaded while `m` lives
//
// Loading runs outside the registry's lock: requests to loaded models go on while another
// loads; requests for the model being loaded wait for that one load.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/generation.h"

namespace tachyon::server {

struct ModelEntry {
  std::string name;  // the served name clients pass as "model"
  std::string dir;   // the folder it loads from; requests naming an alias of it pick it too
};

// How the registry builds and weighs a model; the server passes serve's, the tests a fake.
struct ModelLoader {
  // Builds the model, engine included. Throws tachyon::Error.
  std::function<std::shared_ptr<const ServedModel>(const ModelEntry&)> load;
  // Bytes the loaded model will hold (weights + KV cache), known before loading it.
  std::function<int64_t(const ModelEntry&)> footprint;
  // What listings show of a model not loaded yet (Ollama /api/tags); null: nothing.
  std::function<ModelDetails(const ModelEntry&)> describe;
  // The folder a name other than a served one resolves to (an alias, a hub id, a path);
  // empty when it names none. Null: only served names are accepted.
  std::function<std::string(const std::string&)> resolve;
};

// When loading one more model would cross any limit set here, idle models are unloaded least
// recently used first until it would not. With nothing set, the limit is the machine's free
// memory (free_bytes). A model that does not fit even alone, or whose rivals are all busy,
// still loads (and a warning says so): refusing would leave the request nothing to run on.
struct ModelBudget {
  int32_t max_loaded = 0;                // models loaded at once; 0: no limit
  int64_t max_bytes = 0;                 // footprints of loaded models together; 0: no limit
  std::function<int64_t()> free_bytes;   // memory free now; consulted when neither limit is set
};

class ModelRegistry {
 public:
  // A loaded model; it is not unloaded while a Lease to it lives.
  using Lease = std::shared_ptr<const ServedModel>;

  ModelRegistry(std::vector<ModelEntry> entries, ModelLoader loader, ModelBudget budget);
  ~ModelRegistry();
  ModelRegistry(const ModelRegistry&) = delete;
  ModelRegistry& operator=(const ModelRegistry&) = delete;

  // The entry a request names: its served name, "name:latest" (Ollama's tag), or another name
  // resolving to the same folder; "" is the first. Throws ApiError 404 listing the served names.
  ModelEntry find(const std::string& requested) const;
  // find(), then the model, loaded (or waited for) if it is not. A failed load is an ApiError
  // 500 (the next request tries again).
  Lease acquire(const std::string& requested);

  // Adds an entry unless its name is served already (a model pulled into --models-dir).
  bool add(ModelEntry entry);
  std::vector<ModelEntry> entries() const;
  size_t size() const;
  // The loaded model of `name`, or null; it is not a Lease (listings only).
  std::shared_ptr<const ServedModel> loaded(const std::string& name) const;
  // Listing details of an entry: the loaded model's, else loader.describe's (cached).
  ModelDetails details(const ModelEntry& entry);
  // Names of the loaded models, most recently used first.
  std::vector<std::string> loaded_names() const;

  struct Counts {
    int64_t loaded = 0, loads = 0, unloads = 0, loaded_bytes = 0;
  };
  Counts counts() const;

 private:
  struct Slot;
  Slot& slot_of(const std::string& requested) const;
  // Under the lock: takes idle models out, LRU first, until `need` more bytes fit; the caller
  // destroys what it returns after unlocking.
  std::vector<std::shared_ptr<const ServedModel>> make_room(const Slot& loading, int64_t need);
  Lease lease(Slot& slot);
  void release(Slot& slot);

  ModelLoader loader_;
  ModelBudget budget_;
  mutable std::mutex mu_;
  std::condition_variable loaded_cv_;  // a load finished (or failed)
  std::vector<std::unique_ptr<Slot>> slots_;
  uint64_t clock_ = 0;
  int64_t loads_ = 0, unloads_ = 0;
};

// Ollama's /api/pull: a download reported as Ollama's progress objects.
struct PullEvent {
  std::string status;       // "pulling manifest", "pulling <digest>", "verifying sha256 digest", ...
  std::string digest;       // the file being pulled (its path in the repository)
  int64_t total = 0, completed = 0;  // bytes of that file
};
using PullProgressFn = std::function<void(const PullEvent&)>;
// Runs the download, reporting progress; returns the entry that serves the pulled model.
using PullJob = std::function<ModelEntry(const PullProgressFn& progress)>;
// Checks a name (throws tachyon::Error when it names no hub repository, before any answer is
// sent) and returns its download. Null: the server does not pull.
using ModelPuller = std::function<PullJob(const std::string& name)>;

}  // namespace tachyon::server
