// A CPU backend that counts its live allocations and runs out of memory at the allocation it is
// told to: how tests reach the out-of-device-memory paths (a long prompt on a full GPU) without one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "kernels/cpu/cpu_backend.h"

namespace tachyon::test_support {

class RunsOutBackend final : public kernels::CpuBackend {
 public:
  void* allocate(size_t bytes) override {
    if (allocations_++ == fail_at) throw Error("out of memory (allocation {})", fail_at);
    ++live;
    return CpuBackend::allocate(bytes);
  }
  void deallocate(void* ptr) override {
    --live;
    CpuBackend::deallocate(ptr);
  }
  int64_t allocations() const { return allocations_; }
  int64_t fail_at = -1, live = 0;

 private:
  int64_t allocations_ = 0;
};

}  // namespace tachyon::test_support
