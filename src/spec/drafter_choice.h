// Which of a server's drafters a request uses: the one with the best measured speed-up over plain
// decoding for the request's kind of text (spec/request_kind.h), from live figures kept per kind
// and per drafter, with exploration of the others on a small, decaying share of requests.
//
// A drafter's score on one request is its tokens per speculative step over its cost ratio: the
// seconds of one of its speculative steps (forward share, drafting, host work) over the seconds of
// one plain step of the same request (the throughput gate's probes, spec/spec_policy.h). Both are
// per-step figures of the same request and time window, so the host's load and the context length
// cancel; their quotient is the request's speculative over plain tokens per second. Tokens per step
// hardly varies between requests of a kind; the cost ratio carries the timing noise (on the shared
// 2-core CI host a plain step took 0.8-4.8 ms under load, and a request has only 4 plain probes).
// So a drafter's figure is the geometric mean of its per-request scores over a long memory
// (kForget: ~32 requests), not an EMA dominated by the last few requests: multiplicative noise
// averages out instead of one slow probe deciding the ranking.
//
// Per kind: each eligible drafter is tried on kMinTrials requests (the least tried first). Then a
// request goes to the drafter with the best optimistic score, its mean plus kConfidence standard
// errors (the per-request spread pooled over the kind's drafters, the host's noise being common
// to them): the best mean, or a contender close enough that the measurements cannot yet tell them
// apart ("explore"); a drafter far behind stops being tried once measured. On a decaying share of
// requests (the n-th kFirstExploreGap + n after the one before, down to 1 in kMaxExploreGap) the
// drafter measured longest ago runs instead (acceptance drifts with the text). Where the best mean
// is below 1 the request decodes plainly (no drafter would pay for it), except on those. Where
// gates are off there are no plain probes: drafters are then ranked by tokens per second alone.
//
//   DrafterChoice choice(num_drafters);
//   auto d = choice.choose(kind, eligible);        // d.drafter: index, or -1 (plain)
//   ... the request runs ...
//   choice.record(kind, d.drafter, measurement);   // at its end
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "spec/request_kind.h"

namespace tachyon::spec {

// A geometric mean over requests with exponential forgetting, and the spread of the logs.
struct DecayedLogMean {
  double sum = 0, sum_sq = 0, weight = 0;  // of log(value), decayed
  void add(double value, double forget);   // value > 0
  bool empty() const { return weight <= 0; }
  double log_mean() const { return empty() ? 0 : sum / weight; }
  double mean() const;    // the geometric mean; 0 when empty
  double spread() const;  // standard deviation of the logs; 0 with fewer than two samples' weight
};

// Live figures of one drafter on one kind of request.
struct DrafterFigures {
  uint64_t chosen = 0;              // requests it was chosen for
  uint64_t measured = 0;            // of which ran long enough to be measured (or were payoff-gated)
  // For display (metrics): EMAs over requests.
  double accepted_per_step = 0;     // accepted drafts per verification step
  double seconds_per_step = 0;      // per speculative step of one request (its share of the forward, drafting, host)
  double tokens_per_second = 0;     // on speculative steps
  // What the choice ranks by: geometric means over requests (kForget).
  double tokens_per_step = 0;       // tokens emitted per timed speculative step
  double cost_ratio = 0;            // a speculative step's seconds over a plain step's, same requests
  double speedup = 0;               // per request tokens_per_step / cost_ratio; 0: not measured
  uint64_t last_chosen = 0;         // decision number (per kind) it was last chosen at
  DecayedLogMean speedups;          // per-request speed-ups (and payoff-gated requests' gate figure)
  DecayedLogMean rates;             // per-request speculative tokens per second (gates off: no plain probes)
  DecayedLogMean step_tokens, costs;  // behind tokens_per_step and cost_ratio
};

// What one finished request measured for its drafter (SpecState's clocks).
struct RequestMeasurement {
  int32_t verify_steps = 0, accepted = 0;  // verifications and drafts accepted
  int32_t spec_steps = 0;                  // timed speculative steps
  int32_t spec_tokens = 0;
  double spec_seconds = 0;
  int32_t plain_tokens = 0;
  double plain_seconds = 0;
};

class DrafterChoice {
 public:
  explicit DrafterChoice(int32_t num_drafters);

  struct Decision {
    int32_t drafter = -1;     // -1: plain decoding
    const char* why = "";     // "only", "untried", "explore", "best", "plain_faster", "none_eligible"
  };
  // eligible[i]: drafter i may run this request (size: num_drafters).
  Decision choose(RequestKind kind, const std::vector<bool>& eligible);
  void record(RequestKind kind, int32_t drafter, const RequestMeasurement& m);
  // The drafter's payoff gate (spec/drafter_payoff.h) kept it off a request of this kind: that
  // counts as a measurement at the speedup the gate judged by (over all its requests), so that a
  // drafter the gate keeps stopping is not tried again and again as untried.
  void record_gated(RequestKind kind, int32_t drafter, double payoff_speedup);

  const DrafterFigures& figures(RequestKind kind, int32_t drafter) const;
  int32_t num_drafters() const { return num_drafters_; }

  static constexpr uint64_t kMinTrials = 2;        // measured requests per kind before a drafter is judged
  static constexpr uint64_t kMaxUnmeasured = 4;    // ... or this many choices that measured nothing
  static constexpr uint64_t kFirstExploreGap = 3;  // requests between the first explorations of a kind ...
  static constexpr uint64_t kMaxExploreGap = 16;   // ... growing by one per exploration up to this
  static constexpr int32_t kMinSpecTokens = 8;     // a request's speculative tokens before it counts
  static constexpr int32_t kMinPlainTokens = 4;    // ... and plain tokens before its speedup counts
  static constexpr double kForget = 1.0 / 32;      // each request's figures forget this share of the past (memory ~32)
  static constexpr double kConfidence = 1.5;       // standard errors of optimism when exploring
  static constexpr double kPriorSpread = 0.2;      // log spread of a request's score until measured (pooled)
  static constexpr double kMinSpread = 0.02;       // ... and the least assumed once measured

 private:
  DrafterFigures& at(RequestKind kind, int32_t drafter);
  double score(const DrafterFigures& f, bool speedups) const;
  double optimistic_score(RequestKind kind, const DrafterFigures& f, bool speedups) const;
  int32_t num_drafters_;
  std::vector<DrafterFigures> figures_;  // [kind][drafter]
  std::array<uint64_t, kNumRequestKinds> decisions_{};
  std::array<uint64_t, kNumRequestKinds> explorations_{};
  std::array<uint64_t, kNumRequestKinds> next_exploration_{};  // decision number; 0: not scheduled yet
};

}  // namespace tachyon::spec
