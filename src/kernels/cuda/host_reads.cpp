#include "kernels/cuda/host_reads.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "base/grow_buffer.h"
#include "kernels/cuda/common.cuh"

namespace tachyon::kernels::cuda {

HostReads::HostReads(cudaStream_t stream) : stream_(stream) {
  for (Slot& s : slots_) TACHYON_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
}

HostReads::~HostReads() {
  for (Slot& s : slots_) {
    if (s.pinned) cudaFreeHost(s.pinned);
    cudaEventDestroy(s.done);
  }
}

void* HostReads::begin(void* dst, size_t bytes) {
  Slot& s = slots_[next_];
  if (s.pending) finish(s);  // never collected: its caller's buffer still gets the bytes
  grow_buffer(
      s.pinned, s.capacity, bytes, std::max<size_t>(bytes, 256),
      [](void* old) { TACHYON_CUDA_CHECK(cudaFreeHost(old)); },  // no copy into it is in flight (finished)
      [](size_t n) { return cuda_malloc_host(n); });
  s.dst = dst;
  s.bytes = bytes;
  return s.pinned;
}

uint64_t HostReads::started() {
  Slot& s = slots_[next_];
  TACHYON_CUDA_CHECK(cudaEventRecord(s.done, stream_));
  s.id = ++last_id_;
  s.pending = true;
  next_ ^= 1;
  return s.id;
}

void HostReads::wait(uint64_t id) {
  for (Slot& s : slots_)
    if (s.pending && s.id == id) finish(s);
}

void HostReads::finish(Slot& s) {
  TACHYON_CUDA_CHECK(cudaEventSynchronize(s.done));
  if (s.bytes) std::memcpy(s.dst, s.pinned, s.bytes);
  s.pending = false;
}

}  // namespace tachyon::kernels::cuda
