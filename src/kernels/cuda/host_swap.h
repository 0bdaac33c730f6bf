// The copy stream of Backend::swap_copy: KV blocks between device memory and pinned host memory
// (kv/kv_cache.h's host tier), off the compute stream but ordered against it: the copies start
// after every op issued on the compute stream before them, and the compute stream's later ops
// start after them (a forward never writes a block still being swapped out, nor reads one still
// being swapped in). Neither side waits on the host.
//
// A step's swaps are gathered, not issued one by one: add() queues each block's layer slices and
// the next op of the backend (CudaBackend::settle, at every op, flush and host copy) issues the
// whole queue as one launch of host_swap_copy.cuh's kernel, which reads and writes the mapped
// pinned memory directly. Per step that is one descriptor upload and one kernel launch per run
// of same-direction swaps (a step's swap-outs, then its swap-ins: usually 2 of each), where one
// cudaMemcpyAsync per slice cost 2 x layers copies per block. A queued copy that would read or
// write bytes an earlier queued one writes (a host slot reused, a block swapped out then in)
// issues the queue before it, so the queue's copies never depend on one another's order.
//
//   HostSwap swap(compute_stream, device);
//   swap.add(copies, /*to_host=*/true);   // queued
//   swap.issue();                          // one launch on the copy stream, ordered as above
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/host_swap_copy.cuh"

namespace tachyon::kernels::cuda {

class HostSwap {
 public:
  HostSwap(cudaStream_t compute, int device);
  ~HostSwap();  // waits for the copies in flight; queued ones not issued are dropped
  HostSwap(const HostSwap&) = delete;
  HostSwap& operator=(const HostSwap&) = delete;

  // Queues copies of one direction (to_host: device src, pinned host dst; else the reverse). The
  // engine thread may call it for a tensor-parallel rank while that rank's thread issues ops.
  void add(std::span<const Backend::DeviceCopy> copies, bool to_host);
  bool empty();  // nothing queued
  // Issues the queue (nothing when it is empty); sets this swap's device for the call.
  void issue();
  void wait();  // issues the queue, then waits for every copy (before pinned memory is freed)
  uint64_t launches() const { return launches_; }  // kernel launches issued so far
  uint64_t slices() const { return slices_; }      // copies they carried

 private:
  struct Staging {  // pinned descriptors of one launch: reused once that launch's upload is done
    SwapSlice* host = nullptr;
    size_t capacity = 0;
    cudaEvent_t uploaded = nullptr;
  };
  // [begin, end) byte ranges keyed by begin, disjoint (insert merges what touches).
  using Ranges = std::map<uintptr_t, uintptr_t>;
  static bool overlaps(const Ranges& ranges, uintptr_t begin, uintptr_t end);
  static void insert(Ranges& ranges, uintptr_t begin, uintptr_t end);
  void issue_locked();

  cudaStream_t compute_;
  int device_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t compute_reached_ = nullptr;  // recorded on the compute stream: the copies wait for it
  cudaEvent_t copies_done_ = nullptr;      // recorded on the copy stream: the compute stream waits for it
  std::mutex mutex_;
  std::vector<SwapSlice> queue_;
  bool queue_to_host_ = false;
  Ranges queued_writes_, queued_reads_;
  Staging staging_[2];
  int next_staging_ = 0;
  SwapSlice* device_slices_ = nullptr;  // the launch's descriptors on the device, grow-only
  size_t device_capacity_ = 0;
  uint64_t launches_ = 0, slices_ = 0;
};

}  // namespace tachyon::kernels::cuda
