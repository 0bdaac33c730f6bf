// What a client asks the engine for, and what it gets back, in tokens. Text, templates, stop
// strings and API shapes are the server's business; the engine sees token ids only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/pflash.h"
#include "sampling/sampler.h"
#include "sampling/token_mask.h"
#include "spec/spec_usage.h"

namespace tachyon::engine {

using RequestId = uint64_t;
// The server names sampling parameters through the engine (it does not depend on sampling/).
using SamplingParams = sampling::SamplingParams;
// Constrained decoding (sampling/grammar.h), named through the engine for the same reason.
using Grammar = sampling::Grammar;
using TokenVocabulary = sampling::TokenVocabulary;

struct GenerationRequest {
  std::vector<int32_t> prompt;             // token ids, non-empty
  sampling::SamplingParams sampling;
  int32_t max_tokens = 256;                // generated tokens at most (>= 1)
  std::vector<int32_t> stop_token_ids;     // finish with reason "stop" when sampled (EOS ids)
  int32_t logprobs = -1;                   // -1: none; 0: the chosen token's; k > 0: plus the top k
  bool prompt_logprobs = false;            // also report logprobs of prompt tokens 1..n-1
  std::optional<bool> speculate;           // per-request override of the server's speculation
  std::optional<int32_t> num_speculative_tokens;  // per-request k (disables auto-k)
  // Constrained decoding: every sampled token keeps the output inside this grammar; stop
  // ids are allowed only once it is complete, and the request finishes ("stop") as soon as
  // nothing may follow. Needs EngineConfig::vocabulary. Speculation is off for the request.
  std::shared_ptr<const Grammar> grammar;
  // PFlash prompt compression (engine/pflash.h): per-request override of EngineConfig::pflash's
  // mode. Never applied to a request that needs its whole prompt: prompt_intact (the server
  // sets it for response_format, and for tools unless the request asked for compression), a
  // grammar, or prompt logprobs.
  std::optional<PflashMode> pflash;
  bool prompt_intact = false;
};

// Speculation statistics of one request (reported in `usage`).
using SpecUsage = spec::SpecUsage;

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.f;
  std::vector<std::pair<int32_t, float>> top;  // (token, logprob), best first
};

// Timeout: the server ended it at its deadline (--request-timeout, or a shutdown's grace period),
// with the output so far.
enum class FinishReason { None, Stop, Length, Abort, Error, Timeout };
const char* finish_reason_name(FinishReason reason);  // "stop" | "length" | "abort" | "error" | "timeout"

// One delivery from the engine to the request's owner: the tokens generated since the last
// delivery, and whether the request is over.
struct RequestOutput {
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;         // parallel to tokens when requested
  std::vector<TokenLogprob> prompt_logprobs;  // once, with the first delivery, when requested
  FinishReason finish = FinishReason::None;
  std::string error;                          // when finish == Error
  int32_t num_prompt_tokens = 0;              // the prompt as sent (logical)
  int32_t num_cached_prompt_tokens = 0;       // prompt tokens served from the prefix cache
  int32_t num_dropped_prompt_tokens = 0;      // prompt tokens PFlash dropped (they have no KV)
  int32_t num_generated_tokens = 0;           // total so far
  SpecUsage spec;                             // totals so far
};

}  // namespace tachyon::engine
