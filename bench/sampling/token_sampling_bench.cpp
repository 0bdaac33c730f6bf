// Host time of one sampled token over a Qwen3-sized vocabulary (151936 logits), with the ratio
// to sorting every candidate once (what the token draw cost before it ranked candidates on
// demand), measured in the same run. Two logit shapes: flat
// (normal, sd 3) and peaked (sd 2 plus 40 spikes, like a confident model), top-k 0 / 50 and
// top-p 0.95 / 1.
//
// Usage: token_sampling_bench   (prints markdown)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/token_sampling.h"

namespace {

using tachyon::kernels::TokenCandidate;
using tachyon::kernels::TokenSampling;

template <typename F>
double ms_per_call(F&& f, int calls) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) f(i);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / calls;
}

std::string fmt_ratio(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx faster", r);
  return buf;
}

}  // namespace

int main() {
  constexpr int kCalls = 20;
  std::printf("| logits | top_k | top_p | kept | ms per token | sorting every candidate, ms | ratio |\n"
              "|---|---|---|---|---|---|---|\n");
  for (int peaked = 0; peaked < 2; ++peaked) {
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.f, peaked ? 2.f : 3.f);
    std::vector<float> logits(151936);
    for (auto& x : logits) x = dist(rng);
    if (peaked)
      for (int i = 0; i < 40; ++i) logits[rng() % logits.size()] += 12.f + 0.2f * static_cast<float>(i);
    // The baseline: every candidate (id, logit / temperature) sorted once.
    const double sort_ms = ms_per_call(
        [&](int) {
          std::vector<TokenCandidate> c(logits.size());
          for (size_t i = 0; i < logits.size(); ++i) c[i] = {static_cast<int32_t>(i), logits[i] / 0.8f};
          std::sort(c.begin(), c.end(), [](const TokenCandidate& a, const TokenCandidate& b) {
            return a.p > b.p || (a.p == b.p && a.id < b.id);
          });
        },
        kCalls);
    for (int top_k : {0, 50})
      for (float top_p : {0.95f, 1.f}) {
        TokenSampling s;
        s.temperature = 0.8f;
        s.top_k = top_k;
        s.top_p = top_p;
        const size_t kept = tachyon::kernels::truncated_distribution(logits, s).size();
        int64_t checksum = 0;
        const double ms = ms_per_call(
            [&](int i) {
              s.u = (i + 0.5) / kCalls;
              checksum += tachyon::kernels::sample_token(logits, s);
            },
            kCalls);
        // Only top-k 0 sorted every candidate before; top-k > 0 took (and takes) a partial sort.
        std::printf("| %s | %d | %.2f | %zu | %.2f | %.2f | %s |\n", peaked ? "peaked" : "flat", top_k, top_p, kept, ms,
                    sort_ms, top_k ? "(partial sort before and now)" : fmt_ratio(sort_ms / ms).c_str());
        if (checksum < 0) return 1;  // keeps the draws
      }
  }
  return 0;
}
