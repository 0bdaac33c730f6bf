#include "kernels/token_sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"

namespace tachyon::kernels {

int32_t argmax_token(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  return best;
}

std::vector<TokenCandidate> truncated_distribution(std::span<const float> logits, const TokenSampling& s) {
  std::vector<TokenCandidate> c;
  c.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i)
    if (logits[i] > -std::numeric_limits<float>::infinity())
      c.push_back({static_cast<int32_t>(i), logits[i] / s.temperature});
  auto by_logit = [](const TokenCandidate& a, const TokenCandidate& b) { return a.p > b.p || (a.p == b.p && a.id < b.id); };
  if (s.top_k > 0 && static_cast<size_t>(s.top_k) < c.size()) {
    std::partial_sort(c.begin(), c.begin() + s.top_k, c.end(), by_logit);
    c.resize(static_cast<size_t>(s.top_k));
  } else {
    std::sort(c.begin(), c.end(), by_logit);
  }
  if (c.empty()) throw Error("every token was masked out by the sampling parameters");
  // softmax over the survivors (logits already divided by temperature)
  const float mx = c.front().p;
  double sum = 0;
  for (auto& x : c) sum += (x.p = std::exp(x.p - mx));
  for (auto& x : c) x.p = static_cast<float>(x.p / sum);
  if (s.top_p < 1.f) {  // smallest prefix whose mass reaches top_p
    double cum = 0;
    size_t keep = 0;
    while (keep < c.size()) {
      cum += c[keep++].p;
      if (cum >= s.top_p) break;
    }
    c.resize(keep);
  }
  if (s.min_p > 0.f) {
    const float threshold = s.min_p * c.front().p;
    size_t keep = 1;
    while (keep < c.size() && c[keep].p >= threshold) ++keep;
    c.resize(keep);
  }
  double total = 0;
  for (const auto& x : c) total += x.p;
  for (auto& x : c) x.p = static_cast<float>(x.p / total);
  return c;
}

int32_t draw_token(const std::vector<TokenCandidate>& dist, double u) {
  double cum = 0;
  for (const auto& c : dist) {
    cum += c.p;
    if (u < cum) return c.id;
  }
  return dist.back().id;  // rounding left a sliver above the last cumulative sum
}

int32_t sample_token(std::span<const float> logits, const TokenSampling& s) {
  if (s.temperature <= 0.f) return argmax_token(logits);
  return draw_token(truncated_distribution(logits, s), s.u);
}

}  // namespace tachyon::kernels
