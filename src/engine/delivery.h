// Delivery: what a request accumulated during a step goes to its owner's RequestStream, merged
// with anything the owner has not collected yet. The engine thread delivers after each step's
// commit; the owner reads from its own thread.
//
//   if (deliver(a)) retire(id);   // the delivery said finish != None
#pragma once

#include "engine/loop_state.h"

namespace tachyon::engine {

// Sends a.pending (with the request's totals, and its prompt logprobs once complete) to its
// stream; nothing when there is nothing new. Returns whether the request is finished: the
// caller retires it.
bool deliver(ActiveRequest& a);
// Tells the owner of a cancelled request that it ended (finish Abort).
void deliver_abort(ActiveRequest& a);

}  // namespace tachyon::engine
