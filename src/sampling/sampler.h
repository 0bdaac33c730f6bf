// Turning one row of logits into a token: logits processors (logit bias, repetition /
// presence / frequency penalties), temperature, truncation (top-k, top-p, min-p), then a
// draw keyed by the token's position. Temperature 0 is greedy (argmax after the processors).
//
// Order, as vLLM and llama.cpp apply it: bias → penalties → temperature → top-k → top-p →
// min-p → sample.
//
// Position-keyed draws: the uniform that decides a request's generated token t (t = 0 for the
// first generated token) is a pure function of (seed, t), not the next number of a stream. So
// the token at t does not depend on how many draws came before it: speculative verification
// (spec/verify.h) takes the target's own draw at each drafted position and accepts the draft
// iff it equals that draw, and the text of a seeded request is plain sampling's whatever was
// drafted, batched, overlapped or drawn on the device (kernels/token_sampling.h, same u).
//
//   SamplingParams p; p.temperature = 0.7f; p.top_p = 0.9f; p.seed = 42;
//   Sampler sampler(p);
//   int32_t token = sampler.sample(logits, history, t);   // history: prompt + generated ids
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/token_sampling.h"

namespace tachyon::sampling {

struct SamplingParams {
  float temperature = 1.f;         // 0: greedy
  int32_t top_k = 0;               // 0: off
  float top_p = 1.f;               // 1: off
  float min_p = 0.f;               // 0: off
  float repetition_penalty = 1.f;  // HF rule over prompt + generated tokens; 1: off
  float presence_penalty = 0.f;    // OpenAI rule over generated tokens
  float frequency_penalty = 0.f;
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to the logits of these ids
  std::optional<uint64_t> seed;    // unseeded: a random seed per request

  bool greedy() const { return temperature <= 0.f; }
  // No bias or penalty: the token is drawn from the raw logits, which the backend can do where
  // the logits are (Backend::sample_tokens), so only token ids come back.
  bool raw_logits() const {
    return repetition_penalty == 1.f && presence_penalty == 0.f && frequency_penalty == 0.f && logit_bias.empty();
  }
  bool plain_greedy() const { return greedy() && raw_logits(); }
  // The backend's description of the draw (temperature and truncation) with the uniform draw u
  // (Sampler::uniform_at).
  kernels::TokenSampling token_sampling(double u) const { return {temperature, top_k, top_p, min_p, u}; }
  // Throws tachyon::Error naming the first out-of-range field.
  void validate(int64_t vocab_size) const;
};

// Tokens seen so far by one request: what penalties look at.
struct TokenHistory {
  std::span<const int32_t> prompt;
  std::span<const int32_t> generated;
};

// Applies bias and penalties in place (no temperature).
void apply_processors(const SamplingParams& params, const TokenHistory& history, std::span<float> logits);

// Index of the largest logit; ties go to the lowest id (stable, batch-independent).
int32_t argmax(std::span<const float> logits);

// The sparse final distribution after temperature and truncation, sorted by descending
// probability (ties by ascending id), probabilities summing to 1 (kernels/token_sampling.h:
// the same arithmetic as every backend's Backend::sample_tokens).
using Candidate = kernels::TokenCandidate;
std::vector<Candidate> distribution(const SamplingParams& params, std::span<const float> processed_logits);

// log softmax of the processed logits (for logprobs / top_logprobs).
std::vector<float> log_softmax(std::span<const float> logits);

// The uniform in [0, 1) (53 bits) that decides generated token `position` of a request seeded
// `seed`: splitmix64 of the mixed seed and the position, so each seed's positions never
// collide and neighbouring seeds (choice i of n gets seed + i) give unrelated draws.
double position_uniform(uint64_t seed, int64_t position);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  const SamplingParams& params() const { return params_; }

  // The seed the draws are keyed by: params.seed, or a random one drawn at construction.
  uint64_t seed() const { return seed_; }

  // Processes `logits` in place and returns generated token `position` (history.generated
  // holds the tokens before it).
  int32_t sample(std::span<float> logits, const TokenHistory& history, int64_t position) const;
  // The token at `position` from logits already processed (and masked by a grammar): argmax at
  // temperature 0, else kernels::sample_token with uniform_at(position). What sample() and
  // speculative verification both emit, so a verified position gives plain sampling's token.
  int32_t choose(std::span<const float> processed_logits, int64_t position) const;
  // The uniform draw for generated token `position` (position_uniform of this request's seed).
  double uniform_at(int64_t position) const { return position_uniform(seed_, position); }

 private:
  SamplingParams params_;
  uint64_t seed_;
};

}  // namespace tachyon::sampling
