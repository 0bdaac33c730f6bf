#include "server/model_registry.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "base/logging.h"
#include "server/api_error.h"

namespace tachyon::server {

struct ModelRegistry::Slot {
  ModelEntry entry;
  std::string canonical_dir;                  // what aliases are compared with
  std::shared_ptr<const ServedModel> model;   // null: not loaded
  std::optional<ModelDetails> described;      // loader.describe's answer, once asked
  int64_t bytes = 0;                          // footprint while loaded
  int32_t in_flight = 0;                      // leases, and the load in progress
  bool loading = false;
  uint64_t last_used = 0;
};

namespace {

std::string canonical(const std::string& dir) {
  if (dir.empty()) return dir;
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::weakly_canonical(dir, ec);
  return ec ? dir : p.string();
}

std::string_view without_latest(std::string_view name) {
  static constexpr std::string_view kLatest = ":latest";
  if (name.size() > kLatest.size() && name.substr(name.size() - kLatest.size()) == kLatest)
    name.remove_suffix(kLatest.size());
  return name;
}

// Names from requests pick among the configured models: a served name, an alias or a hub id,
// never a file system path. A name that could walk the file system (absolute, home-relative,
// dot-led, a ".." step, a backslash, a control byte such as NUL, or %-escapes that some layer
// might decode) is refused before anything resolves it.
bool path_shaped(std::string_view name) {
  if (name.front() == '/' || name.front() == '.' || name.front() == '~') return true;
  if (name.find("..") != std::string_view::npos) return true;
  for (char c : name)
    if (c == '\\' || c == '%' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  return false;
}

}  // namespace

ModelRegistry::ModelRegistry(std::vector<ModelEntry> entries, ModelLoader loader, ModelBudget budget)
    : loader_(std::move(loader)), budget_(std::move(budget)) {
  for (ModelEntry& e : entries) add(std::move(e));
}

ModelRegistry::~ModelRegistry() = default;

bool ModelRegistry::add(ModelEntry entry) {
  std::lock_guard lock(mu_);
  for (const auto& s : slots_)
    if (s->entry.name == entry.name) return false;
  auto slot = std::make_unique<Slot>();
  slot->canonical_dir = canonical(entry.dir);
  slot->entry = std::move(entry);
  slots_.push_back(std::move(slot));
  return true;
}

std::vector<ModelEntry> ModelRegistry::entries() const {
  std::lock_guard lock(mu_);
  std::vector<ModelEntry> out;
  for (const auto& s : slots_) out.push_back(s->entry);
  return out;
}

size_t ModelRegistry::size() const {
  std::lock_guard lock(mu_);
  return slots_.size();
}

ModelRegistry::Slot& ModelRegistry::slot_of(const std::string& requested) const {
  {
    std::lock_guard lock(mu_);
    if (requested.empty() && !slots_.empty()) return *slots_.front();
    const std::string_view name = without_latest(requested);
    for (const auto& s : slots_)
      if (s->entry.name == requested || s->entry.name == name) return *s;
    // A served model's own folder, spelled as it was configured or as its canonical path: matched
    // as text, so a request never makes the server look anywhere on the file system.
    if (!requested.empty() && requested.front() == '/')
      for (const auto& s : slots_)
        if (requested == s->canonical_dir || requested == s->entry.dir) return *s;
  }
  // An alias or hub id: resolved outside the lock (it reads the file system).
  std::string dir;
  if (loader_.resolve && !requested.empty() && !path_shaped(requested)) {
    try {
      dir = canonical(loader_.resolve(std::string(without_latest(requested))));
    } catch (const std::exception&) {
      dir.clear();  // names nothing: the 404 below says what is served
    }
  }
  std::lock_guard lock(mu_);
  std::string served;
  for (const auto& s : slots_) {
    if (!dir.empty() && s->canonical_dir == dir) return *s;
    served += fmt::format("{}'{}'", served.empty() ? "" : ", ", s->entry.name);
  }
  throw ApiError(ErrorKind::NotFound,
                 fmt::format("model '{}' not found; this server serves {}", requested, served), "model",
                 "model_not_found");
}

ModelEntry ModelRegistry::find(const std::string& requested) const { return slot_of(requested).entry; }

ModelRegistry::Lease ModelRegistry::acquire(const std::string& requested) {
  Slot& slot = slot_of(requested);
  std::unique_lock lock(mu_);
  if (slot.model) return lease(slot);  // the common case: no file system work
  lock.unlock();
  const int64_t need = loader_.footprint ? loader_.footprint(slot.entry) : 0;
  lock.lock();
  while (!slot.model && slot.loading) loaded_cv_.wait(lock);
  if (slot.model) return lease(slot);
  // This thread loads it; the reservation keeps make_room (of other loads) off it.
  slot.loading = true;
  ++slot.in_flight;
  std::vector<std::shared_ptr<const ServedModel>> unloaded = make_room(slot, need);
  lock.unlock();
  unloaded.clear();  // engines and weights freed here, outside the lock
  std::shared_ptr<const ServedModel> model;
  try {
    model = loader_.load(slot.entry);
  } catch (const std::exception& e) {
    lock.lock();
    slot.loading = false;
    --slot.in_flight;
    loaded_cv_.notify_all();
    // The request was fine; the server could not load what it serves.
    throw ApiError(ErrorKind::Internal, fmt::format("model '{}' failed to load: {}", slot.entry.name, e.what()));
  }
  lock.lock();
  slot.model = std::move(model);
  slot.bytes = need;
  slot.loading = false;
  ++loads_;
  --slot.in_flight;
  loaded_cv_.notify_all();
  return lease(slot);
}

std::vector<std::shared_ptr<const ServedModel>> ModelRegistry::make_room(const Slot& loading, int64_t need) {
  std::vector<std::shared_ptr<const ServedModel>> out;
  const bool by_free_memory = budget_.max_loaded <= 0 && budget_.max_bytes <= 0 && budget_.free_bytes;
  const int64_t free_now = by_free_memory ? budget_.free_bytes() : 0;
  int64_t freed = 0;
  auto fits = [&] {
    int32_t count = 1;  // the one to load
    int64_t bytes = need;
    for (const auto& s : slots_) {
      if (s.get() == &loading || !(s->model || s->loading)) continue;
      ++count;
      bytes += s->bytes;
    }
    if (budget_.max_loaded > 0 && count > budget_.max_loaded) return false;
    if (budget_.max_bytes > 0 && bytes > budget_.max_bytes) return false;
    return !by_free_memory || free_now + freed >= need;
  };
  while (!fits()) {
    Slot* victim = nullptr;
    for (const auto& s : slots_)
      if (s->model && s->in_flight == 0 && (!victim || s->last_used < victim->last_used)) victim = s.get();
    if (!victim) {
      log::warn("loading model '{}' exceeds the model memory budget: every other loaded model is serving requests",
                loading.entry.name);
      break;
    }
    log::info("unloading model '{}' (least recently used) to load '{}'", victim->entry.name, loading.entry.name);
    out.push_back(std::move(victim->model));
    victim->model = nullptr;
    freed += victim->bytes;
    victim->bytes = 0;
    ++unloads_;
  }
  return out;
}

ModelRegistry::Lease ModelRegistry::lease(Slot& slot) {
  ++slot.in_flight;
  slot.last_used = ++clock_;
  // The lease's control block gives the count back; the aliasing pointer is the model.
  struct Hold {
    ModelRegistry* registry;
    Slot* slot;
    std::shared_ptr<const ServedModel> model;
    ~Hold() { registry->release(*slot); }
  };
  std::shared_ptr<Hold> hold(new Hold{this, &slot, slot.model});
  return Lease(hold, hold->model.get());
}

void ModelRegistry::release(Slot& slot) {
  std::lock_guard lock(mu_);
  --slot.in_flight;
}

std::shared_ptr<const ServedModel> ModelRegistry::loaded(const std::string& name) const {
  std::lock_guard lock(mu_);
  for (const auto& s : slots_)
    if (s->entry.name == name) return s->model;
  return nullptr;
}

ModelDetails ModelRegistry::details(const ModelEntry& entry) {
  Slot* slot = nullptr;
  {
    std::lock_guard lock(mu_);
    for (const auto& s : slots_)
      if (s->entry.name == entry.name) slot = s.get();
    if (!slot) return {};
    if (slot->model) return slot->model->details;
    if (slot->described) return *slot->described;
  }
  ModelDetails d;
  try {
    if (loader_.describe) d = loader_.describe(entry);
  } catch (const std::exception& e) {
    log::warn("model '{}': {}", entry.name, e.what());  // listed without details
  }
  std::lock_guard lock(mu_);
  slot->described = d;
  return d;
}

std::vector<std::string> ModelRegistry::loaded_names() const {
  std::lock_guard lock(mu_);
  std::vector<const Slot*> loaded;
  for (const auto& s : slots_)
    if (s->model) loaded.push_back(s.get());
  std::sort(loaded.begin(), loaded.end(), [](const Slot* a, const Slot* b) { return a->last_used > b->last_used; });
  std::vector<std::string> out;
  for (const Slot* s : loaded) out.push_back(s->entry.name);
  return out;
}

ModelRegistry::Counts ModelRegistry::counts() const {
  std::lock_guard lock(mu_);
  Counts c{.loads = loads_, .unloads = unloads_};
  for (const auto& s : slots_)
    if (s->model) {
      ++c.loaded;
      c.loaded_bytes += s->bytes;
    }
  return c;
}

}  // namespace tachyon::server
