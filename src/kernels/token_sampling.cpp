#include "kernels/token_sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "kernels/sampling_arithmetic.h"

namespace tachyon::kernels {

namespace {

namespace arith = sampling_arithmetic;

struct Ranked {
  uint64_t key;   // arith::candidate_key: rank order is descending key
  uint64_t mass;  // arith::candidate_mass
};
bool ranks_before(const Ranked& a, const Ranked& b) { return a.key > b.key; }

// Top-k ranks by p, which needs sampling_exp of every candidate (~1 ms of a 150k vocabulary on a
// CPU core, against 0.1 ms for the rest of a top-k draw). Drops the candidates that cannot be
// among the k most likely without computing their p: with x_k the k-th largest x, a candidate
// with x below x_k - 1e-4 has p below that of every candidate at or above x_k (e^-1e-4 is far
// outside the rounding of x - max and sampling_exp's 2.4e-7), so the k most likely by p lie in
// the window. Near underflow (x_k - max below -80, or not finite) every candidate stays.
// Returns the largest x (the first after the partial sort).
float keep_top_k_window(std::vector<TokenCandidate>& x, size_t k) {
  const auto by_x = [](const TokenCandidate& a, const TokenCandidate& b) { return a.p > b.p; };
  // The k largest and 64 more in order (a heap: one comparison for most of a 150k row); the
  // window almost always ends among them.
  const size_t sorted = std::min(x.size(), k + 64);
  std::partial_sort(x.begin(), x.begin() + static_cast<long>(sorted), x.end(), by_x);
  const float max_x = x[0].p;
  const double x_k = x[k - 1].p;
  if (!(x_k - max_x >= -80.0)) return max_x;
  const auto in_window = [&](const TokenCandidate& c) { return static_cast<double>(c.p) >= x_k - 1e-4; };
  const auto window_end = in_window(x[sorted - 1])
                              ? std::partition(x.begin() + static_cast<long>(sorted), x.end(), in_window)
                              : std::partition_point(x.begin() + static_cast<long>(k), x.begin() + static_cast<long>(sorted), in_window);
  x.erase(window_end, x.end());
  return max_x;
}

// The candidates of one row after temperature and top-k, with a prefix in rank order that grows
// on demand: top-p, min-p and the draw read the most likely candidates first and rarely need
// more than a few hundred of a 150k vocabulary, so sorting all of them (what dominated a sampled
// token's host time: ~20 ms at 152k) is left for when a walk goes that far.
class RankedCandidates {
 public:
  RankedCandidates(std::span<const float> logits, const TokenSampling& s) {
    constexpr float kMasked = -std::numeric_limits<float>::infinity();
    std::vector<TokenCandidate> x;  // {id, logit / temperature} of every finite logit
    x.reserve(logits.size());
    for (size_t i = 0; i < logits.size(); ++i)
      if (logits[i] > kMasked) x.push_back({static_cast<int32_t>(i), logits[i] / s.temperature});
    if (x.empty()) throw Error("every token was masked out by the sampling parameters");
    const bool top_k = s.top_k > 0 && static_cast<size_t>(s.top_k) < x.size();
    const float max_x = top_k ? keep_top_k_window(x, static_cast<size_t>(s.top_k))
                              : std::max_element(x.begin(), x.end(), [](const TokenCandidate& a, const TokenCandidate& b) {
                                  return a.p < b.p;
                                })->p;
    for (TokenCandidate& c : x) c.p = arith::candidate_p(c.p, max_x);  // x becomes p: vectorised (CMakeLists)
    c_.resize(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      c_[i] = {arith::candidate_key(x[i].p, static_cast<uint32_t>(x[i].id)), arith::candidate_mass(x[i].p)};
    if (top_k) {
      std::partial_sort(c_.begin(), c_.begin() + s.top_k, c_.end(), ranks_before);
      c_.resize(static_cast<size_t>(s.top_k));
      sorted_ = c_.size();
    }
    for (const Ranked& r : c_) total_ += r.mass;  // an integer sum: any order gives the same
  }

  size_t size() const { return c_.size(); }
  uint64_t total() const { return total_; }
  // The i-th candidate in rank order.
  const Ranked& at(size_t i) {
    if (i >= sorted_) rank_through(i + 1);
    return c_[i];
  }
  // Rank order for the first m candidates (the rest stay after them, unordered).
  void rank_through(size_t m) {
    if (m <= sorted_) return;
    m = std::min(c_.size(), std::max({m, 2 * sorted_, size_t{256}}));
    const auto first = c_.begin() + static_cast<long>(sorted_), last = c_.begin() + static_cast<long>(m);
    if (m < c_.size()) std::nth_element(first, last - 1, c_.end(), ranks_before);
    std::sort(first, last, ranks_before);
    sorted_ = m;
  }

 private:
  std::vector<Ranked> c_;
  size_t sorted_ = 0;
  uint64_t total_ = 0;
};

// How many candidates top-p and min-p keep (a prefix in rank order) and their total mass.
std::pair<size_t, uint64_t> truncate(RankedCandidates& c, const TokenSampling& s) {
  size_t keep = c.size();
  uint64_t mass = c.total();
  if (s.top_p < 1.f) {  // the smallest prefix whose mass reaches top_p of the total
    const uint64_t target = arith::ceil_times(s.top_p, mass);
    uint64_t cum = 0;
    size_t k = 0;
    while (k < c.size()) {
      cum += c.at(k++).mass;
      if (cum >= target) break;
    }
    keep = k, mass = cum;
  }
  if (s.min_p > 0.f) {  // p >= min_p * the top p (min_p <= 1: the top candidate stays)
    const uint64_t bound = arith::key_at_least(arith::mul_rn(s.min_p, arith::key_p(c.at(0).key)));
    size_t k = 1;
    uint64_t cum = c.at(0).mass;
    while (k < keep && c.at(k).key >= bound) cum += c.at(k++).mass;
    keep = k, mass = cum;
  }
  return {keep, mass};
}

}  // namespace

int32_t argmax_token(std::span<const float> logits) {
  // The first index whose value equals the largest (NaN never wins; a NaN first logit does, as
  // in "replace the best on a strictly greater value"): the max in 16 independent lanes, which
  // vectorises (a verify step takes one argmax per row over the vocabulary: the one-chain loop
  // cost 26 us per 8192 logits, a tenth of a demo-model decode step), then one search for it.
  const size_t n = logits.size();
  if (n == 0 || !(logits[0] == logits[0])) return 0;
  constexpr size_t kLanes = 16;
  float lanes[kLanes];
  for (float& l : lanes) l = logits[0];
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t l = 0; l < kLanes; ++l) lanes[l] = logits[i + l] > lanes[l] ? logits[i + l] : lanes[l];
  float best = lanes[0];
  for (const float l : lanes) best = l > best ? l : best;
  for (; i < n; ++i) best = logits[i] > best ? logits[i] : best;
  for (size_t j = 0; j < n; ++j)
    if (logits[j] == best) return static_cast<int32_t>(j);
  return 0;
}

std::vector<TokenCandidate> truncated_distribution(std::span<const float> logits, const TokenSampling& s) {
  RankedCandidates c(logits, s);
  const auto [keep, mass] = truncate(c, s);
  c.rank_through(keep);
  std::vector<TokenCandidate> dist(keep);
  for (size_t i = 0; i < keep; ++i) {
    const Ranked& r = c.at(i);
    dist[i] = {static_cast<int32_t>(arith::key_id(r.key)), static_cast<float>(static_cast<double>(r.mass) / mass)};
  }
  return dist;
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
  // The first candidate in rank order whose cumulative mass passes floor(u * kept mass).
  RankedCandidates c(logits, s);
  const auto [keep, mass] = truncate(c, s);
  const uint64_t threshold = arith::floor_times(s.u, mass);
  uint64_t cum = 0;
  for (size_t i = 0; i < keep; ++i) {
    cum += c.at(i).mass;
    if (cum > threshold) return static_cast<int32_t>(arith::key_id(c.at(i).key));
  }
  return static_cast<int32_t>(arith::key_id(c.at(keep - 1).key));  // unreachable: threshold < mass
}

}  // namespace tachyon::kernels
