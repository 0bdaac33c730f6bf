// Backend::sample_tokens and the token draw of kernels/token_sampling.h against distributions
// worked out by hand: temperature, top-k, top-p, min-p, ties, the draw's boundaries, and rows
// with different settings in one call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "base/error.h"
#include "kernels/backend.h"
#include "kernels/sampling_arithmetic.h"
#include "kernels/token_sampling.h"

namespace tachyon::kernels {
namespace {

// Token ids 0..4 with probabilities 0.15, 0.05, 0.5, 0.3, 0 (-inf): sorted, ids 2, 3, 0, 1 with
// cumulative 0.5, 0.8, 0.95, 1.
std::vector<float> four_way() {
  return {std::log(0.15f), std::log(0.05f), std::log(0.5f), std::log(0.3f), -std::numeric_limits<float>::infinity()};
}

TokenSampling at(double u, float temperature = 1.f) {
  TokenSampling s;
  s.temperature = temperature;
  s.u = u;
  return s;
}

TEST(TokenSampling, DrawsTheCandidateWhoseCumulativeProbabilityPassesU) {
  const auto logits = four_way();
  EXPECT_EQ(sample_token(logits, at(0.0)), 2);
  EXPECT_EQ(sample_token(logits, at(0.49)), 2);
  EXPECT_EQ(sample_token(logits, at(0.51)), 3);
  EXPECT_EQ(sample_token(logits, at(0.79)), 3);
  EXPECT_EQ(sample_token(logits, at(0.81)), 0);
  EXPECT_EQ(sample_token(logits, at(0.96)), 1);
  EXPECT_EQ(sample_token(logits, at(0.999999)), 1);  // never the -inf token
  EXPECT_EQ(sample_token(logits, at(0.99, 0.f)), 2);  // temperature 0: the argmax
}

// argmax_token is "replace the best on a strictly greater logit" over the row: the lowest id
// among equal maxima (-0 equals +0), NaN skipped unless it is the first logit, rows shorter and
// longer than its 16 lanes, the maximum in the lanes' part and in the tail.
TEST(TokenSampling, ArgmaxIsTheFirstLargestLogit) {
  auto definition = [](std::span<const float> x) {
    int32_t best = 0;
    for (size_t i = 1; i < x.size(); ++i)
      if (x[i] > x[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
    return best;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> small(-3, 3);
  for (const size_t n : {1, 5, 16, 17, 33, 8192, 8191}) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> x(n);
      for (float& v : x) v = static_cast<float>(small(rng));  // many ties
      if (trial % 4 == 1) x[rng() % n] = nan;
      if (trial % 4 == 2) x[0] = nan;
      if (trial % 4 == 3) x[rng() % n] = -0.f, x[rng() % n] = 3.f;
      if (trial == 5) std::fill(x.begin(), x.end(), -inf);
      EXPECT_EQ(argmax_token(x), definition(x)) << "n " << n << " trial " << trial;
    }
  }
}

TEST(TokenSampling, TruncationKeepsTheRightPrefix) {
  const auto logits = four_way();
  TokenSampling s = at(0.99);
  s.top_k = 2;  // ids 2, 3 renormalised to 0.625, 0.375
  EXPECT_EQ(sample_token(logits, s), 3);
  s.u = 0.6;
  EXPECT_EQ(sample_token(logits, s), 2);
  s = at(0.99);
  s.top_p = 0.75f;  // smallest prefix reaching 0.75: ids 2, 3
  EXPECT_EQ(sample_token(logits, s), 3);
  s.top_p = 0.85f;  // ids 2, 3, 0
  EXPECT_EQ(sample_token(logits, s), 0);
  s = at(0.99);
  s.min_p = 0.25f;  // p >= 0.125: ids 2, 3, 0
  EXPECT_EQ(sample_token(logits, s), 0);
  s.min_p = 0.5f;  // p >= 0.25: ids 2, 3
  EXPECT_EQ(sample_token(logits, s), 3);
  const auto dist = truncated_distribution(logits, s);
  ASSERT_EQ(dist.size(), 2u);
  EXPECT_NEAR(dist[0].p, 0.625f, 1e-6f);
  EXPECT_NEAR(dist[1].p, 0.375f, 1e-6f);
}

TEST(TokenSampling, TemperatureSharpensAndTiesGoToTheLowerId) {
  // Two tokens at log 0.6 and log 0.4: at temperature 0.5 the probabilities are 0.36 / 0.52
  // and 0.16 / 0.52 (0.692 and 0.308).
  const std::vector<float> logits = {std::log(0.4f), std::log(0.6f)};
  EXPECT_EQ(sample_token(logits, at(0.68, 0.5f)), 1);
  EXPECT_EQ(sample_token(logits, at(0.70, 0.5f)), 0);
  const std::vector<float> tied = {1.f, 3.f, 3.f, 0.f};
  EXPECT_EQ(sample_token(tied, at(0.5, 0.f)), 1);
  TokenSampling one = at(0.99);
  one.top_k = 1;
  EXPECT_EQ(sample_token(tied, one), 1);
  const std::vector<float> masked(3, -std::numeric_limits<float>::infinity());
  EXPECT_THROW(sample_token(masked, at(0.5)), Error);
}

// Candidates are ranked on demand (the first 256, then doubling): a top-p that keeps thousands
// and draws deep in the tail give the rank order of a full sort, and the lazy draw agrees with
// the materialised distribution everywhere.
TEST(TokenSampling, RankingOnDemandMatchesAFullSort) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> logits(5000);
  for (auto& x : logits) x = std::round(normal(rng) * 64.f) / 64.f;  // many equal logits: ties by id
  TokenSampling s = at(0.0, 0.7f);
  s.top_p = 0.99f;
  const auto dist = truncated_distribution(logits, s);
  ASSERT_GT(dist.size(), 1000u);
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  double mx = logits[order[0]] / 0.7, z = 0, cum = 0, mass = 0;
  for (float l : logits) z += std::exp(l / 0.7 - mx);
  for (size_t i = 0; i < dist.size(); ++i) {
    ASSERT_EQ(dist[i].id, order[i]) << "rank " << i;
    cum += std::exp(logits[order[i]] / 0.7 - mx) / z;
    mass += dist[i].p;
    if (i + 1 < dist.size()) {
      EXPECT_LT(cum, 0.99 + 1e-5) << "kept more than top-p needs at rank " << i;
    }
  }
  EXPECT_GT(cum, 0.99 - 1e-5);
  EXPECT_NEAR(mass, 1.0, 1e-5);
  for (double u : {0.0, 0.3, 0.75, 0.99, 0.9999, 0.999999}) {
    s.u = u;
    EXPECT_EQ(sample_token(logits, s), draw_token(dist, u)) << "u " << u;
    TokenSampling all = s;
    all.top_p = 1.f;
    EXPECT_EQ(sample_token(logits, all), draw_token(truncated_distribution(logits, all), u)) << "u " << u;
  }
}

TEST(TokenSampling, BackendDrawsEachRowWithItsOwnSettings) {
  for (const char* device : {"cpu", "reference"}) {
    const auto backend = make_backend(device);
    const auto row = four_way();
    std::vector<float> logits;
    for (int r = 0; r < 4; ++r) logits.insert(logits.end(), row.begin(), row.end());
    logits.insert(logits.end(), 5, -std::numeric_limits<float>::infinity());  // nothing to draw: -1
    std::vector<TokenSampling> params = {at(0.3, 0.f), at(0.9), at(0.6), at(0.99), at(0.5)};
    params[2].top_p = 0.4f;  // id 2 only
    params[3].top_k = 3;     // ids 2, 3, 0 over 0.95: 0.99 draws id 0
    auto* x = static_cast<float*>(backend->allocate(logits.size() * sizeof(float)));
    auto* ids = static_cast<int32_t*>(backend->allocate(5 * sizeof(int32_t)));
    backend->copy_to_device(x, logits.data(), logits.size() * sizeof(float));
    backend->sample_tokens(x, 5, 5, params.data(), ids);
    std::vector<int32_t> got(5);
    backend->copy_to_host(got.data(), ids, got.size() * sizeof(int32_t));
    EXPECT_EQ(got, (std::vector<int32_t>{2, 0, 2, 0, -1})) << device;
    backend->deallocate(x);
    backend->deallocate(ids);
  }
}

// Top-k keeps the k most likely by (p, id), as ranking every candidate by p would: the host
// computes p only inside a window of x below the k-th largest, which must lose nothing when
// distinct logits meet at one p, sit one ulp apart at the boundary, or tie by the thousand.
TEST(TokenSampling, TopKKeepsTheMostLikelyByProbabilityAndId) {
  namespace arith = sampling_arithmetic;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<std::vector<float>> rows;
  rows.emplace_back(3000);
  for (auto& x : rows.back()) x = std::round(normal(rng) * 16.f) / 16.f;  // ties by the hundred
  rows.emplace_back(3000);
  for (size_t i = 0; i < rows.back().size(); ++i)  // one ulp apart around 1.5, and tiny steps
    rows.back()[i] = i % 3 == 0 ? std::nextafter(1.5f, 2.f * static_cast<float>(i % 2)) : 1.5f - 1e-7f * (i % 7);
  rows.emplace_back(3000);
  for (auto& x : rows.back()) x = normal(rng) * 30.f;  // spread past the exp's underflow
  for (const auto& logits : rows)
    for (float temperature : {0.3f, 1.f})
      for (int32_t k : {1, 7, 100, 1000, 2999}) {
        std::vector<std::pair<uint64_t, uint64_t>> all;  // {key, mass} of every candidate
        float max_x = -std::numeric_limits<float>::infinity();
        for (float l : logits) max_x = std::max(max_x, l / temperature);
        for (size_t i = 0; i < logits.size(); ++i) {
          const float p = arith::candidate_p(logits[i] / temperature, max_x);
          all.push_back({arith::candidate_key(p, static_cast<uint32_t>(i)), arith::candidate_mass(p)});
        }
        std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
        uint64_t total = 0;
        for (int32_t i = 0; i < k; ++i) total += all[i].second;
        TokenSampling s = at(0.5, temperature);
        s.top_k = k;
        const auto dist = truncated_distribution(logits, s);
        ASSERT_EQ(dist.size(), static_cast<size_t>(k));
        for (int32_t i = 0; i < k; ++i) {
          ASSERT_EQ(dist[i].id, static_cast<int32_t>(arith::key_id(all[i].first))) << "k " << k << ", rank " << i;
          ASSERT_EQ(dist[i].p, static_cast<float>(static_cast<double>(all[i].second) / total)) << "rank " << i;
        }
      }
}

// The exp the host and the CUDA kernel share: within a few ulp of the true value, exactly 1 at 0
// (the top candidate's p, which min-p scales), 0 below the subnormals and for NaN.
TEST(SamplingArithmetic, ExpIsAccurateAndExactWhereTheDrawReadsIt) {
  using sampling_arithmetic::sampling_exp;
  EXPECT_EQ(sampling_exp(0.f), 1.f);
  EXPECT_EQ(sampling_exp(-0.f), 1.f);
  EXPECT_EQ(sampling_exp(-104.5f), 0.f);
  EXPECT_EQ(sampling_exp(-std::numeric_limits<float>::infinity()), 0.f);
  EXPECT_EQ(sampling_exp(std::numeric_limits<float>::quiet_NaN()), 0.f);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> r(-103.9f, 0.f);
  double worst = 0;
  for (int i = 0; i < 1000000; ++i) {
    const float x = i < 200000 ? -static_cast<float>(i) * 1e-5f : r(rng);  // dense near 0, then anywhere
    const double want = std::exp(static_cast<double>(x)), got = sampling_exp(x);
    if (want >= 0x1p-126) {
      worst = std::max(worst, std::abs(got - want) / want);
    } else {
      ASSERT_LE(std::abs(got - want), 0x1p-149) << "x " << x;  // subnormal: one rounding of the last scale
    }
  }
  EXPECT_LT(worst, 4 * 0x1p-24) << "relative error";
}

// The integer mass from p's bits is p * 2^40 truncated, as a float conversion gives it.
TEST(SamplingArithmetic, MassIsTheTruncatedScaledProbability) {
  using sampling_arithmetic::bits_of;
  using sampling_arithmetic::candidate_mass;
  for (float p : {0.f, 1.f, 0.5f, 0x1p-40f, 0x1p-41f, 0x1.fffffep-41f, 0x1p-126f, 0x1p-149f, 0.999999940f})
    EXPECT_EQ(candidate_mass(p), static_cast<uint64_t>(p * 0x1p40f)) << p;
  std::mt19937 rng(8);
  for (int i = 0; i < 1000000; ++i) {
    const float p = bits_of<float>(static_cast<uint32_t>(rng() % 0x3f800001u));  // every float in [0, 1]
    ASSERT_EQ(candidate_mass(p), static_cast<uint64_t>(p * 0x1p40f)) << p;
  }
}

// Integer mass times a probability, exactly: top-p's target rounds up, the draw's threshold down,
// where float or double arithmetic would land on the wrong side of an integer.
TEST(SamplingArithmetic, ScaledMassesAreExact) {
  using sampling_arithmetic::ceil_times;
  using sampling_arithmetic::floor_times;
  EXPECT_EQ(floor_times(0.0, 12345), 0u);
  EXPECT_EQ(floor_times(0.5, 7), 3u);
  EXPECT_EQ(floor_times(0.75, 4), 3u);
  EXPECT_EQ(floor_times(1.0 - 0x1p-53, uint64_t{1} << 53), (uint64_t{1} << 53) - 1);
  EXPECT_EQ(floor_times(1.0 - 0x1p-53, ~uint64_t{0}), ~uint64_t{0} - 2048);  // 2^64 - 1 - 2^11 + 2^-53
  EXPECT_EQ(floor_times(0x1p-1074, ~uint64_t{0}), 0u);                     // subnormal u
  EXPECT_EQ(ceil_times(0.5f, 7), 4u);
  EXPECT_EQ(ceil_times(0.5f, 8), 4u);
  EXPECT_EQ(ceil_times(0.1f, 10), 2u);  // 0.1f is 0.100000001490116...: 10 of it exceed 1
  EXPECT_EQ(ceil_times(0.9f, 10), 9u);  // 0.9f is 0.899999976158142...
  std::mt19937_64 rng(5);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t k = rng() >> 11, s = rng() >> (rng() % 64);  // u = k * 2^-53, any mass
    const auto product = static_cast<sampling_arithmetic::uint128>(k) * s;
    ASSERT_EQ(floor_times(static_cast<double>(k) * 0x1p-53, s), static_cast<uint64_t>(product >> 53)) << k << " " << s;
    const uint32_t m = static_cast<uint32_t>(rng() >> 40);  // f = m * 2^-24 < 1
    if (m == 0) continue;
    const auto fp = static_cast<sampling_arithmetic::uint128>(m) * s;
    const uint64_t want = static_cast<uint64_t>(fp >> 24) + ((fp & 0xffffff) != 0);
    ASSERT_EQ(ceil_times(static_cast<float>(m) * 0x1p-24f, s), want) << m << " " << s;
  }
}

}  // namespace
}  // namespace tachyon::kernels
