// Backend::sample_tokens on the GPU draws the host's token (kernels::sample_token) for every row,
// exactly: the same logits and u must give the same token wherever the step drew it (a request
// may be drawn on the device in one step and on the host in the next). Rows cover what the
// kernel's descent must get right: peaked and flat distributions, ties by the thousand, masked
// logits, top-k around and beyond the shared-memory gather, top-p and min-p, u at its ends,
// temperatures that overflow the scaled logits, greedy rows among sampled ones, and a row
// without a finite logit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "base/error.h"
#include "kernels/token_sampling.h"
#include "cuda_test_fixture.h"

namespace tachyon::kernels {
namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

struct Row {
  std::vector<float> logits;
  TokenSampling s;
};

TokenSampling sampling(float temperature, int32_t top_k, float top_p, float min_p, double u) {
  TokenSampling s;
  s.temperature = temperature, s.top_k = top_k, s.top_p = top_p, s.min_p = min_p, s.u = u;
  return s;
}

std::vector<Row> rows_to_draw(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  auto flat = [&](float scale) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = normal(rng) * scale;
    return v;
  };
  auto peaked = [&] {  // a confident model: a few tokens far above a flat bulk
    auto v = flat(2.f);
    for (int j = 0; j < 40; ++j) v[static_cast<size_t>(rng() % n)] = 12.f + normal(rng) * 3.f;
    return v;
  };
  auto tied = [&] {  // logits on a 1/8 grid: thousands of equal candidates per value
    auto v = flat(1.5f);
    for (auto& x : v) x = std::round(x * 8.f) / 8.f;
    return v;
  };
  auto masked = [&] {
    auto v = peaked();
    for (size_t i = 0; i < v.size(); i += 3) v[i] = kMasked;
    return v;
  };
  const double last_u = 1.0 - 0x1p-53;
  std::vector<Row> rows;
  for (float t : {0.3f, 0.7f, 1.f, 1.5f}) {
    rows.push_back({flat(3.f), sampling(t, 0, 1.f, 0.f, uniform(rng))});
    rows.push_back({peaked(), sampling(t, 0, 1.f, 0.f, uniform(rng))});
    rows.push_back({tied(), sampling(t, 0, 1.f, 0.f, uniform(rng))});
    rows.push_back({masked(), sampling(t, 0, 0.9f, 0.f, uniform(rng))});
  }
  for (int32_t k : {1, 5, 50, 4095, 4096, 4097, 20000, static_cast<int32_t>(n) - 1, static_cast<int32_t>(n)}) {
    rows.push_back({flat(2.f), sampling(1.f, k, 1.f, 0.f, uniform(rng))});
    rows.push_back({tied(), sampling(0.8f, k, 0.95f, 0.f, uniform(rng))});
  }
  for (float p : {0.1f, 0.5f, 0.9f, 0.99999f}) {
    rows.push_back({flat(1.f), sampling(1.f, 0, p, 0.f, uniform(rng))});
    rows.push_back({peaked(), sampling(0.9f, 40, p, 0.f, uniform(rng))});
  }
  for (float m : {0.001f, 0.05f, 0.5f, 1.f}) {
    rows.push_back({flat(3.f), sampling(1.f, 0, 1.f, m, uniform(rng))});
    rows.push_back({peaked(), sampling(1.f, 0, 0.95f, m, uniform(rng))});
  }
  for (double u : {0.0, 0x1p-53, 0.5, last_u}) {
    rows.push_back({flat(2.f), sampling(1.f, 0, 1.f, 0.f, u)});
    rows.push_back({tied(), sampling(1.f, 100, 0.8f, 0.f, u)});
  }
  rows.push_back({std::vector<float>(static_cast<size_t>(n), 0.5f), sampling(1.f, 0, 1.f, 0.f, 0.7)});  // all tied
  rows.push_back({flat(1.f), sampling(1e-38f, 0, 1.f, 0.f, 0.3)});  // logit / temperature overflows to +-inf
  rows.push_back({peaked(), sampling(0.f, 0, 1.f, 0.f, 0.3)});      // greedy among sampled rows
  rows.push_back({std::vector<float>(static_cast<size_t>(n), kMasked), sampling(1.f, 0, 1.f, 0.f, 0.3)});
  return rows;
}

// The rows' logits back to back, and their settings.
std::pair<std::vector<float>, std::vector<TokenSampling>> flatten(const std::vector<Row>& rows) {
  std::pair<std::vector<float>, std::vector<TokenSampling>> out;
  for (const Row& row : rows) {
    out.first.insert(out.first.end(), row.logits.begin(), row.logits.end());
    out.second.push_back(row.s);
  }
  return out;
}

// The host's token, or -1 where the host refuses the row (no finite logit).
int32_t host_token(const Row& row) {
  try {
    return sample_token(row.logits, row.s);
  } catch (const Error&) {
    return -1;
  }
}

TEST_F(CudaKernels, SampleTokensDrawsTheHostsTokenInEveryRow) {
  for (const int64_t n : {int64_t{7}, int64_t{40000}, int64_t{151936}}) {
    const auto rows = rows_to_draw(n, rng);
    const auto [logits, params] = flatten(rows);
    const int64_t count = static_cast<int64_t>(rows.size());
    auto* ids = upload(std::vector<int32_t>(rows.size(), -7));
    gpu->sample_tokens(upload(logits), count, n, params.data(), ids);
    std::vector<int32_t> got(rows.size());
    gpu->copy_to_host(got.data(), ids, got.size() * sizeof(int32_t));
    for (int64_t r = 0; r < count; ++r) {
      const TokenSampling& s = rows[r].s;
      EXPECT_EQ(got[r], host_token(rows[r])) << "n " << n << ", row " << r << ": temperature " << s.temperature
                                             << ", top_k " << s.top_k << ", top_p " << s.top_p << ", min_p "
                                             << s.min_p << ", u " << s.u;
    }
  }
}

// A row's token does not depend on the rows drawn with it.
TEST_F(CudaKernels, SampleTokensRowAloneDrawsWhatItDrawsInABatch) {
  const int64_t n = 151936;
  const auto rows = rows_to_draw(n, rng);
  const auto [logits, params] = flatten(rows);
  const float* x = upload(logits);
  auto* ids = upload(std::vector<int32_t>(rows.size(), -7));
  gpu->sample_tokens(x, static_cast<int64_t>(rows.size()), n, params.data(), ids);
  std::vector<int32_t> batched(rows.size()), alone(1);
  gpu->copy_to_host(batched.data(), ids, batched.size() * sizeof(int32_t));
  for (size_t r = 0; r < rows.size(); r += 7) {
    gpu->sample_tokens(x + r * n, 1, n, &params[r], ids);
    gpu->copy_to_host(alone.data(), ids, sizeof(int32_t));
    EXPECT_EQ(alone[0], batched[r]) << "row " << r;
  }
}

}  // namespace
}  // namespace tachyon::kernels
