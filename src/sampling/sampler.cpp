#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <random>

#include "base/error.h"
#include "base/hash64.h"

namespace tachyon::sampling {

void SamplingParams::validate(int64_t vocab_size) const {
  if (!(temperature >= 0.f) || !std::isfinite(temperature)) throw Error("temperature must be >= 0, got {}", temperature);
  if (top_k < 0) throw Error("top_k must be >= 0, got {}", top_k);
  if (!(top_p > 0.f && top_p <= 1.f)) throw Error("top_p must be in (0, 1], got {}", top_p);
  if (!(min_p >= 0.f && min_p <= 1.f)) throw Error("min_p must be in [0, 1], got {}", min_p);
  if (!(repetition_penalty > 0.f) || !std::isfinite(repetition_penalty))
    throw Error("repetition_penalty must be > 0, got {}", repetition_penalty);
  if (!(presence_penalty >= -2.f && presence_penalty <= 2.f))
    throw Error("presence_penalty must be in [-2, 2], got {}", presence_penalty);
  if (!(frequency_penalty >= -2.f && frequency_penalty <= 2.f))
    throw Error("frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || id >= vocab_size) throw Error("logit_bias names token {} outside the vocabulary [0, {})", id, vocab_size);
    if (!(bias >= -100.f && bias <= 100.f)) throw Error("logit_bias for token {} must be in [-100, 100], got {}", id, bias);
  }
}

void apply_processors(const SamplingParams& p, const TokenHistory& history, std::span<float> logits) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  for (const auto& [id, bias] : p.logit_bias)
    if (id >= 0 && id < vocab) logits[id] += bias;
  if (p.repetition_penalty != 1.f) {
    std::vector<int32_t> seen;
    seen.insert(seen.end(), history.prompt.begin(), history.prompt.end());
    seen.insert(seen.end(), history.generated.begin(), history.generated.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int32_t id : seen) {
      if (id < 0 || id >= vocab) continue;
      float& l = logits[id];
      l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    }
  }
  if (p.presence_penalty != 0.f || p.frequency_penalty != 0.f) {
    std::unordered_map<int32_t, int32_t> counts;
    for (int32_t id : history.generated) ++counts[id];
    for (const auto& [id, count] : counts) {
      if (id < 0 || id >= vocab) continue;
      logits[id] -= p.presence_penalty + p.frequency_penalty * static_cast<float>(count);
    }
  }
}

int32_t argmax(std::span<const float> logits) { return kernels::argmax_token(logits); }

std::vector<float> log_softmax(std::span<const float> logits) {
  float mx = -std::numeric_limits<float>::infinity();
  for (float l : logits) mx = std::max(mx, l);
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - mx));
  const float log_sum = static_cast<float>(std::log(sum));
  std::vector<float> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - mx - log_sum;
  return out;
}

std::vector<Candidate> distribution(const SamplingParams& p, std::span<const float> logits) {
  if (p.greedy()) return {{argmax(logits), 1.f}};
  return kernels::truncated_distribution(logits, p.token_sampling(0.0));
}

double position_uniform(uint64_t seed, int64_t position) {
  // The golden-ratio step is odd, so distinct positions give distinct inputs to the bijective
  // finaliser: one seed's draws never repeat a 64-bit value.
  const uint64_t bits = hash64_mix(hash64_mix(seed) + static_cast<uint64_t>(position) * 0x9e3779b97f4a7c15ull);
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

namespace {
uint64_t random_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}
}  // namespace

Sampler::Sampler(const SamplingParams& params) : params_(params), seed_(params.seed ? *params.seed : random_seed()) {}

int32_t Sampler::choose(std::span<const float> processed_logits, int64_t position) const {
  if (params_.greedy()) return argmax(processed_logits);
  // The draw without materialising the whole ranked distribution (kernels/token_sampling.h),
  // and what Backend::sample_tokens computes with the same u.
  return kernels::sample_token(processed_logits, params_.token_sampling(uniform_at(position)));
}

int32_t Sampler::sample(std::span<float> logits, const TokenHistory& history, int64_t position) const {
  apply_processors(params_, history, logits);
  return choose(logits, position);
}

}  // namespace tachyon::sampling
