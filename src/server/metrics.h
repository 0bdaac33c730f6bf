// GET /metrics: Prometheus text exposition of the server's HTTP counters and the engine's
// statistics (requests, tokens, TTFT and inter-token latency histograms, queue depth, KV
// blocks, prefix-cache hits in memory and on disk, the response cache).
#pragma once

#include <array>
#include <atomic>
#include <string>

#include "engine/stats.h"
#include "server/response_cache.h"

namespace tachyon::server {

class HttpCounters {
 public:
  enum Route {
    kChat, kCompletions, kResponses, kMessages, kModels, kOllamaChat, kOllamaGenerate, kOllamaOther, kHealth, kMetrics,
    kOther, kNumRoutes
  };
  static const char* route_name(Route route);
  // Status classes 2xx..5xx.
  void count(Route route, int status);
  uint64_t get(Route route, int status_class) const;

 private:
  std::array<std::array<std::atomic<uint64_t>, 4>, kNumRoutes> counts_{};
};

// `response_cache`: the model's response cache, null when it has none (no series then).
std::string render_metrics(const std::string& model, const engine::EngineStats& stats, const HttpCounters& http,
                           int32_t in_flight, const ResponseCacheStats* response_cache = nullptr);

}  // namespace tachyon::server
