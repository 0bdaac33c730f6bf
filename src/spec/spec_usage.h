// What speculation did for one request, as reported to its client (`usage`) and counted in the
// engine's stats: the drafter, its drafts and acceptances, and the gate that stopped it.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace tachyon::spec {

// The gates that switch a request's speculation off (SpecUsage::stopped_by), spec/spec_policy.h.
// choice_gate: with several drafters, each one measured slower than plain decoding on the
// request's kind of text (spec/drafter_choice.h).
inline constexpr std::array<const char*, 5> kSpecGates = {"prompt_gate", "payoff_gate", "acceptance_gate",
                                                          "throughput_gate", "choice_gate"};

struct SpecUsage {
  std::string method;          // drafter name, empty when speculation was off
  int32_t num_drafted = 0;     // draft tokens verified
  int32_t num_accepted = 0;    // of which accepted
  int32_t num_steps = 0;       // verification steps
  std::string stopped_by;      // "", or the gate (kSpecGates)
  std::string kind;            // the request's kind of text (spec/request_kind.h)
  std::string choice;          // with several drafters, why this one (DrafterChoice::Decision::why); else ""
  double mean_accepted_length() const {  // tokens emitted per verification step
    return num_steps ? 1.0 + static_cast<double>(num_accepted) / num_steps : 0.0;
  }
};

}  // namespace tachyon::spec
