// The engine thread's state, shared by the stages of a step (drafting, StepRunner, Commit,
// delivery): each running request's record, and the model, KV cache, scheduler, speculation
// policy and stats that EngineLoop owns. Touched on the engine thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"
#include "engine/scheduler.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "sampling/token_mask.h"
#include "spec/spec_policy.h"

namespace tachyon::engine {

using Clock = std::chrono::steady_clock;
inline double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

class StatsRecorder;

// One admitted request, from admission to retirement.
struct ActiveRequest {
  GenerationRequest request;
  std::weak_ptr<RequestStream> stream;
  std::vector<int32_t> tokens;  // prompt + generated, then spec.num_drafts unverified drafts
  int32_t num_prompt = 0;          // prompt tokens in `tokens` (PFlash: the kept ones)
  int32_t num_logical_prompt = 0;  // the prompt as sent
  // PFlash with original positions: the sent prompt's position of each kept token; tokens after
  // the prompt follow the sent prompt's end. Empty: positions are indices into `tokens`.
  std::vector<int32_t> kept_positions;
  int32_t num_cached_prompt = -1;  // known at the first scheduled chunk
  std::unique_ptr<sampling::Sampler> sampler;
  std::unique_ptr<sampling::TokenConstraint> constraint;  // request.grammar's state; null: none
  kv::SeqId seq = -1;
  // Preempted: the tokens of its whole blocks whose KV the prefix cache (pool or host tier)
  // should give back when it is admitted again; -1 when not preempted.
  int32_t resume_tokens = -1;
  int32_t resume_cached = -1;  // ... and what the prefix cache gave back at its admission
  bool wait_for_room = false;  // its prefix is in a tier the pool has no room for yet (kv::KvCache::match_prefix)
  Clock::time_point submitted, last_token;
  bool first_token_sent = false;
  RequestOutput pending;  // accumulated since the last delivery
  std::vector<TokenLogprob> prompt_logprobs;
  spec::SpecState spec;

  bool speculating() const { return !spec.off; }
  int32_t num_generated() const { return static_cast<int32_t>(tokens.size()) - num_prompt; }
  // The position RoPE sees for the token at index p of `tokens`.
  int32_t rope_position(int32_t p) const {
    return p < num_prompt ? kept_positions[static_cast<size_t>(p)] : p + (num_logical_prompt - num_prompt);
  }
  // Blocks of a prompt whose tokens sit at other positions than their indices hold K/V that no
  // plain prompt has: they are never shared through the prefix cache.
  bool prefix_cacheable() const { return kept_positions.empty(); }
};

using ActiveRequests = std::unordered_map<RequestId, ActiveRequest>;

struct LoopState {
  const EngineConfig& config;
  int32_t max_context;
  model::Model& model;
  kv::KvCache& kv;
  Scheduler& scheduler;
  ActiveRequests& active;
  spec::SpecPolicy& policy;
  StatsRecorder& stats;
};

}  // namespace tachyon::engine
