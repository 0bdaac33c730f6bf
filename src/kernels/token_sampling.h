// The token draw every backend computes (Backend::sample_tokens) and the host sampler uses
// (sampling/sampler.h): temperature, then top-k, top-p and min-p truncation over the
// candidates ranked by descending probability (ties by ascending id), then the first candidate
// whose cumulative probability passes the row's uniform draw. The order vLLM and llama.cpp apply.
// The arithmetic is kernels/sampling_arithmetic.h's (integer masses, one exp), which the CUDA
// kernel shares: the same logits and u give the same token on the host and on the device.
//
//   auto dist = truncated_distribution(logits, {.temperature = 0.7f, .top_p = 0.9f});
//   int32_t token = draw_token(dist, u);  // u in [0, 1)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/ops.h"

namespace tachyon::kernels {

struct TokenCandidate {
  int32_t id;
  float p;
};

// Index of the largest logit; ties go to the lowest id (stable, batch-independent).
int32_t argmax_token(std::span<const float> logits);

// The sparse distribution after temperature (> 0) and truncation, sorted by descending
// probability (ties by ascending id), probabilities summing to 1 (s.u is not used).
// Throws tachyon::Error when every logit is -inf.
std::vector<TokenCandidate> truncated_distribution(std::span<const float> logits, const TokenSampling& s);

// The first candidate whose cumulative probability exceeds u (the last where rounding leaves
// a sliver above the final sum). For any distribution (speculative decoding's residuals);
// sample_token draws in integer masses and can differ from it where u meets a boundary.
int32_t draw_token(const std::vector<TokenCandidate>& dist, double u);

// argmax_token for temperature 0, else draw_token(truncated_distribution(...), s.u).
int32_t sample_token(std::span<const float> logits, const TokenSampling& s);

}  // namespace tachyon::kernels
