#include "spec/drafter_choice.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "spec/ema.h"

namespace tachyon::spec {

namespace {
constexpr double kDisplayEmaWeight = 0.25;  // the display figures' EMA (metrics)
}  // namespace

void DecayedLogMean::add(double value, double forget) {
  const double x = std::log(value), keep = 1 - forget;
  sum = keep * sum + x;
  sum_sq = keep * sum_sq + x * x;
  weight = keep * weight + 1;
}

double DecayedLogMean::mean() const { return empty() ? 0 : std::exp(log_mean()); }

double DecayedLogMean::spread() const {
  if (weight < 2) return 0;
  const double m = log_mean();
  return std::sqrt(std::max(0.0, sum_sq / weight - m * m));
}

DrafterChoice::DrafterChoice(int32_t num_drafters)
    : num_drafters_(num_drafters), figures_(static_cast<size_t>(num_drafters) * kNumRequestKinds) {}

DrafterFigures& DrafterChoice::at(RequestKind kind, int32_t drafter) {
  TACHYON_CHECK(drafter >= 0 && drafter < num_drafters_, "drafter {} of {}", drafter, num_drafters_);
  return figures_[static_cast<size_t>(kind) * static_cast<size_t>(num_drafters_) + static_cast<size_t>(drafter)];
}

const DrafterFigures& DrafterChoice::figures(RequestKind kind, int32_t drafter) const {
  return const_cast<DrafterChoice*>(this)->at(kind, drafter);
}

// Log of the figure the drafters are ranked by: the speed-up, or (no plain probes) tokens per second.
double DrafterChoice::score(const DrafterFigures& f, bool speedups) const {
  return (speedups ? f.speedups : f.rates).log_mean();
}

// The score it could still have: its mean plus kConfidence standard errors of that mean. The
// noise is mostly the host's (the timing of plain probes), common to every drafter of the kind:
// its spread is pooled over them, so that two requests that happened to agree do not make one
// drafter's figure look certain.
double DrafterChoice::optimistic_score(RequestKind kind, const DrafterFigures& f, bool speedups) const {
  double spread_sum = 0, weight_sum = 0;
  for (int32_t d = 0; d < num_drafters_; ++d) {
    const DrafterFigures& other = figures(kind, d);
    const DecayedLogMean& samples = speedups ? other.speedups : other.rates;
    if (samples.weight >= 2) spread_sum += samples.spread() * samples.weight, weight_sum += samples.weight;
  }
  const double spread = weight_sum > 0 ? std::max(spread_sum / weight_sum, kMinSpread) : kPriorSpread;
  const DecayedLogMean& samples = speedups ? f.speedups : f.rates;
  return samples.log_mean() + kConfidence * spread / std::sqrt(samples.weight);
}

DrafterChoice::Decision DrafterChoice::choose(RequestKind kind, const std::vector<bool>& eligible) {
  TACHYON_CHECK(static_cast<int32_t>(eligible.size()) == num_drafters_, "eligibility of {} drafters for {}",
                eligible.size(), num_drafters_);
  const size_t k = static_cast<size_t>(kind);
  const uint64_t decision = ++decisions_[k];
  auto ok = [&](int32_t d) { return eligible[static_cast<size_t>(d)]; };
  int32_t num_eligible = 0, only = -1;
  for (int32_t d = 0; d < num_drafters_; ++d)
    if (ok(d)) ++num_eligible, only = d;
  auto pick = [&](int32_t d, const char* why) {
    DrafterFigures& f = at(kind, d);
    ++f.chosen;
    f.last_chosen = decision;
    return Decision{d, why};
  };
  if (num_eligible == 0) return {-1, "none_eligible"};
  if (num_eligible == 1) return pick(only, "only");
  // Untried: the eligible drafter measured least often here, while it may still be measured.
  int32_t untried = -1;
  for (int32_t d = 0; d < num_drafters_; ++d) {
    const DrafterFigures& f = at(kind, d);
    if (!ok(d) || f.measured >= kMinTrials || f.chosen >= kMaxUnmeasured) continue;
    if (untried < 0 || f.chosen < at(kind, untried).chosen) untried = d;
  }
  if (untried >= 0) return pick(untried, "untried");
  // The best: by speed-up where every measured candidate has one, else by tokens per second.
  bool speedups = true;
  for (int32_t d = 0; d < num_drafters_; ++d)
    if (ok(d) && at(kind, d).measured > 0 && at(kind, d).speedups.empty()) speedups = false;
  auto measured = [&](int32_t d) { return !(speedups ? at(kind, d).speedups : at(kind, d).rates).empty(); };
  int32_t best = -1;
  for (int32_t d = 0; d < num_drafters_; ++d)
    if (ok(d) && measured(d) && (best < 0 || score(at(kind, d), speedups) > score(at(kind, best), speedups))) best = d;
  if (best < 0) return pick(only, "only");  // nothing measured (every request too short): the last eligible
  // Drift: on a decaying share of requests, the drafter measured longest ago (acceptance changes
  // with the text; a drafter switched off by one workload is measured again on the next).
  if (next_exploration_[k] == 0) next_exploration_[k] = decision + kFirstExploreGap;
  if (decision >= next_exploration_[k]) {
    ++explorations_[k];
    next_exploration_[k] = decision + std::min(kMaxExploreGap, kFirstExploreGap + explorations_[k]);
    int32_t oldest = -1;
    for (int32_t d = 0; d < num_drafters_; ++d)
      if (ok(d) && d != best && (oldest < 0 || at(kind, d).last_chosen < at(kind, oldest).last_chosen)) oldest = d;
    if (oldest >= 0) return pick(oldest, "explore");
  }
  if (speedups && score(at(kind, best), speedups) < 0) return {-1, "plain_faster"};
  // A contender: the drafter whose optimistic score beats the best's by the most takes the
  // request, so that a near-tie is measured until it is settled (a few per cent apart, each
  // request's figure ~20% noisy: tens of requests), while a drafter far behind is not.
  int32_t contender = best;
  double contender_score = optimistic_score(kind, at(kind, best), speedups);
  for (int32_t d = 0; d < num_drafters_; ++d) {
    if (!ok(d) || d == best || !measured(d)) continue;
    const double optimistic = optimistic_score(kind, at(kind, d), speedups);
    if (optimistic > contender_score) contender = d, contender_score = optimistic;
  }
  return contender == best ? pick(best, "best") : pick(contender, "explore");
}

void DrafterChoice::record(RequestKind kind, int32_t drafter, const RequestMeasurement& m) {
  if (drafter < 0 || m.spec_tokens < kMinSpecTokens || m.spec_seconds <= 0 || m.spec_steps <= 0) return;
  DrafterFigures& f = at(kind, drafter);
  ++f.measured;
  const double step_seconds = m.spec_seconds / m.spec_steps, tokens_per_step = static_cast<double>(m.spec_tokens) / m.spec_steps;
  if (m.verify_steps > 0)
    ema_update(f.accepted_per_step, static_cast<double>(m.accepted) / m.verify_steps, kDisplayEmaWeight);
  ema_update(f.seconds_per_step, step_seconds, kDisplayEmaWeight);
  ema_update(f.tokens_per_second, m.spec_tokens / m.spec_seconds, kDisplayEmaWeight);
  f.rates.add(m.spec_tokens / m.spec_seconds, kForget);
  if (m.plain_tokens < kMinPlainTokens || m.plain_seconds <= 0) return;
  const double cost = step_seconds / (m.plain_seconds / m.plain_tokens);
  f.step_tokens.add(tokens_per_step, kForget);
  f.costs.add(cost, kForget);
  f.speedups.add(tokens_per_step / cost, kForget);
  f.tokens_per_step = f.step_tokens.mean();
  f.cost_ratio = f.costs.mean();
  f.speedup = f.speedups.mean();
}

void DrafterChoice::record_gated(RequestKind kind, int32_t drafter, double payoff_speedup) {
  if (drafter < 0 || payoff_speedup <= 0) return;
  DrafterFigures& f = at(kind, drafter);
  ++f.measured;
  f.speedups.add(payoff_speedup, kForget);
  f.speedup = f.speedups.mean();
}

}  // namespace tachyon::spec
