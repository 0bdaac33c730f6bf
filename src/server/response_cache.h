// The response cache (`--response-cache BYTES`, off by default): a request whose output is
// fully determined by its inputs — greedy (temperature 0) or drawn with a fixed seed — and that
// was seen before is answered from memory instead of the engine.
//
// What is kept is the engine's side of the answer: its deliveries (token batches, logprobs,
// the finish reason) in the order they came. A hit replays them through the same
// detokenizer, stop matcher and handler as a live generation, so every API answers in its own
// shapes, streaming (chunk by chunk, as the engine delivered them) or not.
//
// The key: the model's fingerprint (weights, quantization, KV format, backend: what changes
// the output), the rendered prompt's token ids, every sampling field (the seed only above
// temperature 0, where it matters), max_tokens, the stop ids and stop strings, logprobs,
// and the grammar (json_object, forced tool calls); not the speculation override, which changes
// no text (seeded draws are keyed by position). Only finished answers are
// kept (stop or length), never one cut by a cancel, a timeout or an error.
//
// LRU by bytes (keys included). Thread safety: every call may come from any thread.
//
//   ResponseCache cache(64 << 20);
//   if (auto key = ResponseCache::key_of(fingerprint, request, stop_strings))
//     if (auto hit = cache.find(*key)) replay(*hit);
//     else cache.insert(*key, record_live_generation());
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/request.h"

namespace tachyon::server {

struct CachedResponse {
  std::vector<engine::RequestOutput> deliveries;  // the last one carries the finish reason
  size_t bytes() const;
};

struct ResponseCacheStats {
  uint64_t hits = 0, misses = 0, insertions = 0, evictions = 0;
  int64_t bytes = 0, entries = 0, max_bytes = 0;
};

class ResponseCache {
 public:
  explicit ResponseCache(int64_t max_bytes);

  // The request's key, or nullopt when its output is not reproducible: sampled (temperature
  // > 0) without a seed.
  static std::optional<std::string> key_of(uint64_t model_fingerprint, const engine::GenerationRequest& request,
                                           std::span<const std::string> stop_strings);
  // Whether an outcome that ended this way may be kept: stop and length only.
  static bool keeps(engine::FinishReason finish) {
    return finish == engine::FinishReason::Stop || finish == engine::FinishReason::Length;
  }

  // The cached answer (now the most recently used), counted as a hit; else a miss.
  std::shared_ptr<const CachedResponse> find(const std::string& key);
  // Keeps the answer, evicting least recently used ones to stay within max_bytes; an answer
  // larger than that alone is not kept.
  void insert(const std::string& key, CachedResponse response);
  ResponseCacheStats stats() const;

 private:
  struct Entry {
    std::shared_ptr<const CachedResponse> response;
    int64_t bytes = 0;
    std::list<std::string>::iterator lru;
  };
  int64_t max_bytes_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> lru_;  // front: least recently used
  ResponseCacheStats stats_;
};

}  // namespace tachyon::server
