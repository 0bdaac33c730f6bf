// Fault injection: makes a step's forward fail, as a device error or an allocation failure
// would, for the requests a test (or a debug build's TACHYON_FAULTS) chooses. The engine must
// then fail only the requests the fault touched, keep serving the rest, and free every block.
//
//   EngineConfig c;
//   c.fault_injector = [](RequestId id, const GenerationRequest& r, int32_t num_generated) {
//     return r.prompt[0] == marker && num_generated >= 3 ? FaultKind::kDeviceError : FaultKind::kNone;
//   };
//
// The injector is asked, before each forward, about every request in the step (with the tokens
// it has generated so far); the first fault it names is thrown inside the forward's error
// handling, exactly where a backend's own error would come from.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "engine/request.h"

namespace tachyon::engine {

enum class FaultKind { kNone, kDeviceError, kOutOfMemory };

using FaultInjector = std::function<FaultKind(RequestId id, const GenerationRequest& request, int32_t num_generated)>;

// Throws what the backend would: tachyon::Error for a device error, std::bad_alloc for an
// allocation failure.
[[noreturn]] void throw_injected_fault(FaultKind kind, RequestId id);

// TACHYON_FAULTS (debug builds): "KIND:every=N[,after=S]" fails every request whose id is a
// multiple of N from its S-th generated token on (S defaults to 0: its first step); KIND is
// "device" or "oom". Throws tachyon::Error naming what is malformed.
FaultInjector parse_fault_spec(const std::string& spec);

}  // namespace tachyon::engine
