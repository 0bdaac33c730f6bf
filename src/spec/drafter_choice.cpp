#include "spec/drafter_choice.h"

#include "base/error.h"
#include "spec/ema.h"

namespace tachyon::spec {

DrafterChoice::DrafterChoice(int32_t num_drafters)
    : num_drafters_(num_drafters), figures_(static_cast<size_t>(num_drafters) * kNumRequestKinds) {}

DrafterFigures& DrafterChoice::at(RequestKind kind, int32_t drafter) {
  TACHYON_CHECK(drafter >= 0 && drafter < num_drafters_, "drafter {} of {}", drafter, num_drafters_);
  return figures_[static_cast<size_t>(kind) * static_cast<size_t>(num_drafters_) + static_cast<size_t>(drafter)];
}

const DrafterFigures& DrafterChoice::figures(RequestKind kind, int32_t drafter) const {
  return const_cast<DrafterChoice*>(this)->at(kind, drafter);
}

DrafterChoice::Decision DrafterChoice::choose(RequestKind kind, const std::vector<bool>& eligible) {
  TACHYON_CHECK(static_cast<int32_t>(eligible.size()) == num_drafters_, "eligibility of {} drafters for {}",
                eligible.size(), num_drafters_);
  const uint64_t decision = ++decisions_[static_cast<size_t>(kind)];
  int32_t num_eligible = 0, only = -1;
  for (int32_t d = 0; d < num_drafters_; ++d)
    if (eligible[static_cast<size_t>(d)]) ++num_eligible, only = d;
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
    if (!eligible[static_cast<size_t>(d)] || f.measured >= kMinTrials || f.chosen >= kMaxUnmeasured) continue;
    if (untried < 0 || f.chosen < at(kind, untried).chosen) untried = d;
  }
  if (untried >= 0) return pick(untried, "untried");
  if (decision % kExploreEvery == 0) {  // the drafter tried longest ago
    int32_t oldest = -1;
    for (int32_t d = 0; d < num_drafters_; ++d)
      if (eligible[static_cast<size_t>(d)] && (oldest < 0 || at(kind, d).last_chosen < at(kind, oldest).last_chosen))
        oldest = d;
    return pick(oldest, "explore");
  }
  // The best: by speedup where every measured candidate has one, else by tokens per second.
  bool speedups = true;
  for (int32_t d = 0; d < num_drafters_; ++d)
    if (eligible[static_cast<size_t>(d)] && at(kind, d).measured > 0 && at(kind, d).speedup <= 0) speedups = false;
  int32_t best = -1;
  double best_score = 0;
  for (int32_t d = 0; d < num_drafters_; ++d) {
    const DrafterFigures& f = at(kind, d);
    if (!eligible[static_cast<size_t>(d)] || f.measured == 0) continue;
    const double score = speedups ? f.speedup : f.tokens_per_second;
    if (best < 0 || score > best_score) best = d, best_score = score;
  }
  if (best < 0) return pick(only, "only");  // nothing measured (every request too short): the last eligible
  if (speedups && best_score < 1) return {-1, "plain_faster"};
  return pick(best, "best");
}

void DrafterChoice::record(RequestKind kind, int32_t drafter, const RequestMeasurement& m) {
  if (drafter < 0 || m.spec_tokens < kMinSpecTokens || m.spec_seconds <= 0 || m.spec_steps <= 0) return;
  DrafterFigures& f = at(kind, drafter);
  ++f.measured;
  if (m.verify_steps > 0)
    ema_update(f.accepted_per_step, static_cast<double>(m.accepted) / m.verify_steps, kEmaWeight);
  ema_update(f.seconds_per_step, m.spec_seconds / m.spec_steps, kEmaWeight);
  const double rate = m.spec_tokens / m.spec_seconds;
  ema_update(f.tokens_per_second, rate, kEmaWeight);
  if (m.plain_tokens >= kMinPlainTokens && m.plain_seconds > 0)
    ema_update(f.speedup, rate / (m.plain_tokens / m.plain_seconds), kEmaWeight);
}

}  // namespace tachyon::spec

namespace tachyon::spec {

void DrafterChoice::record_gated(RequestKind kind, int32_t drafter, double payoff_speedup) {
  if (drafter < 0 || payoff_speedup <= 0) return;
  DrafterFigures& f = at(kind, drafter);
  ++f.measured;
  ema_update(f.speedup, payoff_speedup, kEmaWeight);
}

}  // namespace tachyon::spec
