// Compiled grammars by canonical text, so that a schema sent with every request is parsed
// and compiled once: a bounded, thread-safe LRU map from a key ("json_schema:" + the
// schema's dump, "regex:" + the pattern, ...) to the compiled Cfg. Failures are not cached.
//
//   auto cfg = GrammarCache::shared().get("regex:" + p, [&] { return regex_grammar(p); });
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "sampling/cfg.h"

namespace tachyon::sampling {

class GrammarCache {
 public:
  explicit GrammarCache(size_t capacity) : capacity_(capacity) {}
  static GrammarCache& shared();  // capacity 256; the server's

  // The compiled grammar for `key`; on a miss, compiles what `gbnf` returns (it throws
  // Error for what it cannot compile, and so does this).
  std::shared_ptr<const Cfg> get(const std::string& key, const std::function<std::string()>& gbnf);

  struct Stats {
    uint64_t hits = 0, misses = 0;
    size_t size = 0;
  };
  Stats stats() const;

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const Cfg>>;
  size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  Stats stats_;
};

}  // namespace tachyon::sampling
