// Reads from the device that the host collects later (Backend::copy_to_host_later). Each read
// copies into a pinned bounce buffer and records an event behind its copy, so collecting it
// waits for that copy alone, not for the step issued after it. Two slots used in turn: one read
// outstanding while the next step's read is started (the engine's overlapped decode steps); a
// slot whose read was never collected is finished (waited for, bytes delivered) before reuse.
//
//   void* pinned = reads.begin(dst, bytes);
//   cudaMemcpyAsync(pinned, src, bytes, cudaMemcpyDeviceToHost, stream);  // or recorded in a graph
//   uint64_t id = reads.started();
//   ... issue the next step ...
//   reads.wait(id);  // dst holds the bytes
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace tachyon::kernels::cuda {

class HostReads {
 public:
  explicit HostReads(cudaStream_t stream);
  ~HostReads();
  HostReads(const HostReads&) = delete;
  HostReads& operator=(const HostReads&) = delete;

  // The pinned buffer (at least `bytes`) the next read copies into; its bytes go to `dst` at wait().
  void* begin(void* dst, size_t bytes);
  // The copy into begin()'s buffer has been issued on the stream: returns the read's id.
  uint64_t started();
  // Waits for read `id` and delivers its bytes (at once if it was delivered already).
  void wait(uint64_t id);

 private:
  struct Slot {
    void* pinned = nullptr;
    size_t capacity = 0;
    cudaEvent_t done = nullptr;
    void* dst = nullptr;
    size_t bytes = 0;
    uint64_t id = 0;
    bool pending = false;  // started, bytes not yet delivered
  };
  void finish(Slot& slot);

  cudaStream_t stream_;
  Slot slots_[2];
  int next_ = 0;
  uint64_t last_id_ = 0;
};

}  // namespace tachyon::kernels::cuda
