// Helpers of the engine tests: greedy requests, random prompts, a request's tokens, the engine's
// stats once idle. (The demo model itself: demo_runs.h.)
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace tachyon::engine::test_helpers {

inline GenerationRequest greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.max_tokens = max_tokens;
  return r;
}

inline std::vector<int32_t> random_prompt(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(n);
  for (auto& t : p) t = static_cast<int32_t>(rng() % 8000);
  return p;
}

// Runs a request to completion; returns its tokens (and its last delivery in `last`).
inline std::vector<int32_t> collect(RequestStream& s, RequestOutput* last = nullptr) {
  std::vector<int32_t> tokens;
  for (;;) {
    auto out = s.next(std::chrono::seconds(120));
    EXPECT_TRUE(out.has_value()) << "timed out";
    if (!out) return tokens;
    tokens.insert(tokens.end(), out->tokens.begin(), out->tokens.end());
    if (out->finish != FinishReason::None) {
      if (last) *last = *out;
      return tokens;
    }
  }
}

// Stats are updated by the engine thread right after the last delivery: wait for it.
inline EngineStats idle_stats(const Engine& engine) {
  for (int i = 0; i < 500; ++i) {
    const auto st = engine.stats();
    if (st.running == 0 && st.queue_depth == 0) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return engine.stats();
}

}  // namespace tachyon::engine::test_helpers
