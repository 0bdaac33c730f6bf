#include "spec/spec_step_costs.h"

#include <algorithm>

#include "spec/ema.h"

namespace tachyon::spec {

namespace {
constexpr double kCostWeight = 0.1;  // of each new step cost
}  // namespace

void DraftAcceptance::record(int32_t depth, int32_t accepted) {
  if (depth <= 0) return;
  if (static_cast<size_t>(depth) > reached_.size()) {
    reached_.resize(static_cast<size_t>(depth));
    accepted_.resize(static_cast<size_t>(depth));
  }
  // Level j (0-based) was reached when the j levels before it were accepted.
  for (int32_t j = 0; j < depth && j <= accepted; ++j) {
    ++reached_[static_cast<size_t>(j)];
    accepted_[static_cast<size_t>(j)] += j < accepted;
  }
  ++steps_;
}

double DraftAcceptance::rate(int32_t level) const {
  for (int32_t j = std::min<int32_t>(level, static_cast<int32_t>(reached_.size())) - 1; j >= 0; --j)
    if (reached_[static_cast<size_t>(j)] >= kMinReached)
      return static_cast<double>(accepted_[static_cast<size_t>(j)]) / reached_[static_cast<size_t>(j)];
  return reached_.empty() || reached_[0] == 0 ? 0.0 : static_cast<double>(accepted_[0]) / reached_[0];
}

double DraftAcceptance::expected_tokens(int32_t k) const {
  double tokens = 1, reach = 1;
  for (int32_t j = 1; j <= k; ++j) {
    reach *= rate(j);
    tokens += reach;
  }
  return tokens;
}

void SpecStepCosts::record_plain(double seconds) { ema_update(plain_, seconds, kCostWeight); }

void SpecStepCosts::record(int32_t drafts, double seconds) {
  if (drafts <= 0 || seconds <= 0) return;
  if (static_cast<size_t>(drafts) >= by_drafts_.size()) by_drafts_.resize(static_cast<size_t>(drafts) + 1);
  Average& a = by_drafts_[static_cast<size_t>(drafts)];
  // One slow step (the host preempted, a first-seen shape) would otherwise lift its count's
  // average for tens of steps, and auto-k would avoid that count meanwhile.
  if (a.samples >= kMinSamples) seconds = std::min(seconds, kMaxStepOverAverage * a.seconds);
  ema_update(a.seconds, seconds, kCostWeight);
  ++a.samples;
}

double SpecStepCosts::cost(int32_t k) const {
  // Least squares over the measured counts, each weighted by its samples (up to kFullWeight):
  // the counts auto-k rarely picks (the deep ones, explored every few steps) are read off the
  // line that the others fix as well, not off their own few, noisy samples.
  double n = 0, sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t d = 1; d < by_drafts_.size(); ++d) {
    if (by_drafts_[d].samples == 0) continue;
    const double w = std::min(static_cast<double>(by_drafts_[d].samples), kFullWeight);
    const double x = static_cast<double>(d), y = by_drafts_[d].seconds;
    n += 1, sw += w, sx += w * x, sy += w * y, sxx += w * x * x, sxy += w * x * y;
  }
  if (n == 0) return 0;
  if (n == 1) {  // one point: through the plain step (no intercept known), or flat
    const double x = sx / sw, y = sy / sw;
    if (plain_ <= 0) return y;
    return std::max(plain_, plain_ + (y - plain_) * static_cast<double>(k) / x);
  }
  // A draft never makes a step cheaper: a negative slope (timing noise) is taken as flat.
  const double slope = std::max(0.0, (sw * sxy - sx * sy) / (sw * sxx - sx * sx));
  const double intercept = (sy - slope * sx) / sw;
  return std::max(intercept + slope * static_cast<double>(k), 1e-9);
}

double SpecStepCosts::bounded_cost(int32_t drafts) const {
  const double c = cost(drafts);
  if (drafts == 0 || plain_ <= 0 || c <= 0) return drafts == 0 ? plain_ : c;
  const double per_row = std::clamp((c - plain_) / drafts, kMinRowCost * plain_, kMaxRowCost * plain_);
  return plain_ + per_row * drafts;
}

int ScoreCalibration::bin(double score) {
  int b = 0;
  for (double edge = 0.5; b + 1 < kBins && !(score > edge); edge *= 0.5) ++b;
  return b;
}

void ScoreCalibration::record(std::span<const double> scores, const std::vector<bool>& accepted) {
  for (size_t i = 0; i < scores.size(); ++i) {
    Bin& b = bins_[static_cast<size_t>(bin(scores[i]))];
    const double hit = i < accepted.size() && accepted[i] ? 1.0 : 0.0;
    // Not ema_update: it reads 0 as "unmeasured", and a rejected node's 0 is a sample.
    const double w = b.nodes == 0 ? 1.0 : kEmaWeight;
    b.predicted += w * (scores[i] - b.predicted);
    b.accepted += w * (hit - b.accepted);
    ++b.nodes;
  }
}

double ScoreCalibration::expected(double score) const {
  const Bin& b = bins_[static_cast<size_t>(bin(score))];
  if (b.nodes < kMinNodes || b.predicted <= 0) return score;
  return std::min(1.0, score * b.accepted / b.predicted);
}

int32_t SpecStepCosts::best_k(const DraftAcceptance& acceptance, int32_t k_max,
                              const std::function<int32_t(int32_t)>& drafts_for) const {
  int32_t best = k_max;
  double best_rate = 0;
  for (int32_t k = 1; k <= k_max; ++k) {
    const double c = cost(drafts_for ? drafts_for(k) : k);
    if (c <= 0) return k_max;
    const double rate = acceptance.expected_tokens(k) / c;
    if (rate > best_rate) best_rate = rate, best = k;
  }
  return best;
}

bool TreeOrChain::trees(uint64_t step) const {
  if (tree_.steps < kMinSteps || chain_.steps < kMinSteps) return tree_.steps <= chain_.steps;
  const bool faster = tree_.tokens / tree_.seconds > chain_.tokens / chain_.seconds;
  return step % kExploreEvery == 0 ? !faster : faster;
}

void TreeOrChain::record(bool tree, int32_t tokens, double seconds) {
  if (seconds <= 0 || tokens <= 0) return;
  Rate& r = tree ? tree_ : chain_;
  // An average over the first steps, then an EMA slower than the step costs': a step's tokens
  // vary from 1 to k + 1.
  const double w = std::max(0.05, 1.0 / (r.steps + 1));
  r.tokens += w * (tokens - r.tokens);
  r.seconds += w * (seconds - r.seconds);
  ++r.steps;
}

}  // namespace tachyon::spec
