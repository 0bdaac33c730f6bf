// The draft stage of a step: each request's drafter (the policy's choice for it) proposes for every running request whose only
// pending token is its last sampled one, as many drafts and in the shape (chain or tree) that
// the speculation policy (spec/spec_policy.h) chooses; a constrained request's drafts are cut
// where its grammar forbids them (spec/grammar_drafts.h). The drafts are appended to the request's
// tokens, so the scheduler schedules them like any other tokens; Commit verifies them.
#pragma once

#include "engine/loop_state.h"

namespace tachyon::engine {

// Returns the seconds spent drafting (every request's, one-time catch-ups included).
double propose_drafts(LoopState& state);

}  // namespace tachyon::engine
