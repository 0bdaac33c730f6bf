// The copy stream of Backend::swap_copy: KV blocks between device memory and pinned host memory
// (kv/kv_cache.h's host tier), off the compute stream but ordered against it: the copies start
// after every op issued on the compute stream so far, and the compute stream's later ops start
// after them (a forward never writes a block still being swapped out, nor reads one still being
// swapped in). Neither side waits on the host.
//
//   HostSwap swap;
//   swap.copy(compute_stream, copies, cudaMemcpyDeviceToHost);
#pragma once

#include <cuda_runtime.h>

#include <span>

#include "kernels/backend.h"

namespace tachyon::kernels::cuda {

class HostSwap {
 public:
  HostSwap();
  ~HostSwap();  // waits for the copies in flight
  HostSwap(const HostSwap&) = delete;
  HostSwap& operator=(const HostSwap&) = delete;

  void copy(cudaStream_t compute, std::span<const Backend::DeviceCopy> copies, cudaMemcpyKind kind);
  void wait();  // every copy issued so far is done (before pinned memory is freed)

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t compute_reached_ = nullptr;  // recorded on the compute stream: the copies wait for it
  cudaEvent_t copies_done_ = nullptr;      // recorded on the copy stream: the compute stream waits for it
};

}  // namespace tachyon::kernels::cuda
