#include "kernels/token_sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"

namespace tachyon::kernels {

namespace {

struct Ranked {
  int32_t id;
  float x;  // logit / temperature: the rank order (descending, ties by ascending id)
  float p;
};
bool ranks_before(const Ranked& a, const Ranked& b) { return a.x > b.x || (a.x == b.x && a.id < b.id); }

// The candidates of one row after temperature, top-k and the softmax, with a prefix in rank
// order that grows on demand: top-p, min-p and the draw read the most likely candidates first
// and rarely need more than a few hundred of a 150k vocabulary, so sorting all of them (what
// dominated a sampled token's host time: ~20 ms at 152k) is left for when a walk goes that far.
class RankedCandidates {
 public:
  RankedCandidates(std::span<const float> logits, const TokenSampling& s) {
    std::vector<TokenCandidate> x;  // {id, logit / temperature}: 8 bytes, for the top-k heap
    x.reserve(logits.size());
    for (size_t i = 0; i < logits.size(); ++i)
      if (logits[i] > -std::numeric_limits<float>::infinity())
        x.push_back({static_cast<int32_t>(i), logits[i] / s.temperature});
    if (x.empty()) throw Error("every token was masked out by the sampling parameters");
    if (s.top_k > 0 && static_cast<size_t>(s.top_k) < x.size()) {
      const auto by_x = [](const TokenCandidate& a, const TokenCandidate& b) {  // ranks_before on {id, x}
        return ranks_before({a.id, a.p, 0.f}, {b.id, b.p, 0.f});
      };
      std::partial_sort(x.begin(), x.begin() + s.top_k, x.end(), by_x);
      x.resize(static_cast<size_t>(s.top_k));
      sorted_ = x.size();
    }
    c_.resize(x.size());
    for (size_t i = 0; i < x.size(); ++i) c_[i] = {x[i].id, x[i].p, 0.f};
    // Softmax over the survivors, the sum in the order they are held (rank order after a
    // top-k cut, index order otherwise).
    float mx = c_.front().x;
    for (const auto& r : c_) mx = std::max(mx, r.x);
    double sum = 0;
    for (auto& r : c_) sum += (r.p = std::exp(r.x - mx));
    for (auto& r : c_) r.p = static_cast<float>(r.p / sum);
  }

  size_t size() const { return c_.size(); }
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
  // Sum of the first `keep` probabilities in the order they are held now (rank order where a
  // walk reached them, index order for an untouched tail).
  double mass(size_t keep) const {
    double total = 0;
    for (size_t i = 0; i < keep; ++i) total += c_[i].p;
    return total;
  }

 private:
  std::vector<Ranked> c_;
  size_t sorted_ = 0;
};

// How many candidates top-p and min-p keep (a prefix in rank order) and their total mass.
std::pair<size_t, double> truncate(RankedCandidates& c, const TokenSampling& s) {
  size_t keep = c.size();
  if (s.top_p < 1.f) {  // smallest prefix whose mass reaches top_p
    double cum = 0;
    size_t k = 0;
    while (k < c.size()) {
      cum += c.at(k++).p;
      if (cum >= s.top_p) break;
    }
    keep = k;
  }
  if (s.min_p > 0.f) {
    const float threshold = s.min_p * c.at(0).p;
    size_t k = 1;
    while (k < keep && c.at(k).p >= threshold) ++k;
    keep = k;
  }
  return {keep, c.mass(keep)};
}

}  // namespace

int32_t argmax_token(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  return best;
}

std::vector<TokenCandidate> truncated_distribution(std::span<const float> logits, const TokenSampling& s) {
  RankedCandidates c(logits, s);
  const auto [keep, total] = truncate(c, s);
  c.rank_through(keep);
  std::vector<TokenCandidate> dist(keep);
  for (size_t i = 0; i < keep; ++i) dist[i] = {c.at(i).id, static_cast<float>(c.at(i).p / total)};
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
  // draw_token over truncated_distribution, ranking only as far as the draw walks.
  RankedCandidates c(logits, s);
  const auto [keep, total] = truncate(c, s);
  double cum = 0;
  for (size_t i = 0; i < keep; ++i) {
    cum += static_cast<float>(c.at(i).p / total);
    if (s.u < cum) return c.at(i).id;
  }
  return c.at(keep - 1).id;
}

}  // namespace tachyon::kernels
