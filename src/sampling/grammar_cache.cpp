#include "sampling/grammar_cache.h"

namespace tachyon::sampling {

GrammarCache& GrammarCache::shared() {
  static GrammarCache cache(256);
  return cache;
}

std::shared_ptr<const Cfg> GrammarCache::get(const std::string& key, const std::function<std::string()>& gbnf) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++stats_.hits;
      return it->second->second;
    }
    ++stats_.misses;
  }
  // Compile outside the lock: two threads may both compile a new key; the result is the same.
  std::shared_ptr<const Cfg> cfg = Cfg::parse_gbnf(gbnf());
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) return it->second->second;
  lru_.emplace_front(key, cfg);
  index_.emplace(key, lru_.begin());
  if (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  stats_.size = lru_.size();
  return cfg;
}

GrammarCache::Stats GrammarCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace tachyon::sampling
