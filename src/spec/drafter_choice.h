// Which of a server's drafters a request uses: the one with the best measured tokens per second
// for the request's kind of text (spec/request_kind.h), from live figures kept per kind and per
// drafter, with bounded exploration of drafters not yet measured on that kind.
//
// A drafter's figure for one request is its speedup: the request's tokens per second on its
// speculative steps (drafting and host work included) over its tokens per second on plain steps
// (the throughput gate's probes, spec/spec_policy.h), both timed inside the same request. Ranking
// by it ranks drafters by tokens per second while cancelling what differs between requests
// (context length, the host's load at the time), which absolute rates of different requests do
// not. Where gates are off there are no plain probes: drafters are then ranked by tokens per
// second alone.
//
// Per kind: each eligible drafter is tried on kMinTrials requests (the least tried first); then
// every kExploreEvery-th request tries the drafter tried longest ago (acceptance drifts with the
// text), and every other request takes the best. Where the best measured speedup is below 1 the
// request decodes plainly (no drafter would pay for it), except on exploration.
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

// Live figures of one drafter on one kind of request: EMAs over the requests it ran.
struct DrafterFigures {
  uint64_t chosen = 0;              // requests it was chosen for
  uint64_t measured = 0;            // of which ran long enough to be measured
  double accepted_per_step = 0;     // accepted drafts per verification step
  double seconds_per_step = 0;      // per speculative step of one request (its share of the forward, drafting, host)
  double tokens_per_second = 0;     // on speculative steps
  double speedup = 0;               // over the same requests' plain steps; 0: not measured
  uint64_t last_chosen = 0;         // decision number (per kind) it was last chosen at
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
  static constexpr uint64_t kExploreEvery = 8;
  static constexpr int32_t kMinSpecTokens = 8;     // a request's speculative tokens before it counts
  static constexpr int32_t kMinPlainTokens = 4;    // ... and plain tokens before its speedup counts
  static constexpr double kEmaWeight = 0.25;

 private:
  DrafterFigures& at(RequestKind kind, int32_t drafter);
  int32_t num_drafters_;
  std::vector<DrafterFigures> figures_;  // [kind][drafter]
  std::array<uint64_t, kNumRequestKinds> decisions_{};
};

}  // namespace tachyon::spec
