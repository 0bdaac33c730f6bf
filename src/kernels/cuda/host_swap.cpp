#include "kernels/cuda/host_swap.h"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "base/error.h"
#include "base/grow_buffer.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_backend_impl.h"

namespace tachyon::kernels::cuda {

namespace {
// The calling thread on `device` for a scope (the engine thread issues every rank's swaps).
class OnDevice {
 public:
  explicit OnDevice(int device) {
    TACHYON_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) TACHYON_CUDA_CHECK(cudaSetDevice(device));
    changed_ = previous_ != device;
  }
  ~OnDevice() {
    if (changed_) cudaSetDevice(previous_);
  }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};
}  // namespace

HostSwap::HostSwap(cudaStream_t compute, int device) : compute_(compute), device_(device) {
  OnDevice on(device_);
  TACHYON_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  TACHYON_CUDA_CHECK(cudaEventCreateWithFlags(&compute_reached_, cudaEventDisableTiming));
  TACHYON_CUDA_CHECK(cudaEventCreateWithFlags(&copies_done_, cudaEventDisableTiming));
  for (Staging& s : staging_) TACHYON_CUDA_CHECK(cudaEventCreateWithFlags(&s.uploaded, cudaEventDisableTiming));
}

HostSwap::~HostSwap() {
  cudaStreamSynchronize(stream_);
  for (Staging& s : staging_) {
    cudaEventDestroy(s.uploaded);
    if (s.host) cudaFreeHost(s.host);
  }
  if (device_slices_) cudaFree(device_slices_);
  cudaEventDestroy(compute_reached_);
  cudaEventDestroy(copies_done_);
  cudaStreamDestroy(stream_);
}

bool HostSwap::overlaps(const Ranges& ranges, uintptr_t begin, uintptr_t end) {
  auto it = ranges.lower_bound(end);  // the first range starting at or after `end` cannot overlap
  return it != ranges.begin() && std::prev(it)->second > begin;
}

void HostSwap::insert(Ranges& ranges, uintptr_t begin, uintptr_t end) {
  auto it = ranges.upper_bound(begin);
  if (it != ranges.begin() && std::prev(it)->second >= begin) {  // joins the range before it
    it = std::prev(it);
    begin = it->first;
    end = std::max(end, it->second);
    it = ranges.erase(it);
  }
  for (; it != ranges.end() && it->first <= end; it = ranges.erase(it)) end = std::max(end, it->second);
  ranges.emplace(begin, end);
}

void HostSwap::add(std::span<const Backend::DeviceCopy> copies, bool to_host) {
  std::lock_guard lock(mutex_);
  if (!queue_.empty() && queue_to_host_ != to_host) issue_locked();
  queue_to_host_ = to_host;
  for (const Backend::DeviceCopy& c : copies) {
    if (c.bytes == 0) continue;
    const auto dst = reinterpret_cast<uintptr_t>(c.dst), src = reinterpret_cast<uintptr_t>(c.src);
    const uintptr_t dst_end = dst + c.bytes, src_end = src + c.bytes;
    // Reads or writes what a queued copy writes, or writes what one reads: after it, not beside it.
    if (overlaps(queued_writes_, dst, dst_end) || overlaps(queued_writes_, src, src_end) ||
        overlaps(queued_reads_, dst, dst_end))
      issue_locked();
    queue_.push_back({c.dst, c.src, c.bytes});
    insert(queued_writes_, dst, dst_end);
    insert(queued_reads_, src, src_end);
  }
}

bool HostSwap::empty() {
  std::lock_guard lock(mutex_);
  return queue_.empty();
}

void HostSwap::issue() {
  std::lock_guard lock(mutex_);
  issue_locked();
}

void HostSwap::issue_locked() {
  if (queue_.empty()) return;
  OnDevice on(device_);
  const size_t n = queue_.size(), bytes = n * sizeof(SwapSlice);
  // Two pinned descriptor buffers in turn: the one written now was last uploaded two launches ago.
  Staging& staging = staging_[next_staging_];
  next_staging_ ^= 1;
  TACHYON_CUDA_CHECK(cudaEventSynchronize(staging.uploaded));
  grow_buffer(
      staging.host, staging.capacity, n, std::max(n, staging.capacity * 3 / 2),
      [](SwapSlice* old) { TACHYON_CUDA_CHECK(cudaFreeHost(old)); },
      [](size_t count) { return static_cast<SwapSlice*>(cuda_malloc_host(count * sizeof(SwapSlice))); });
  std::memcpy(staging.host, queue_.data(), bytes);
  grow_buffer(
      device_slices_, device_capacity_, n, std::max(n, device_capacity_ * 3 / 2),
      [&](SwapSlice* old) {
        TACHYON_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the last launch may still read the old buffer
        TACHYON_CUDA_CHECK(cudaFree(old));
      },
      [](size_t count) { return static_cast<SwapSlice*>(cuda_malloc(count * sizeof(SwapSlice))); });
  TACHYON_CUDA_CHECK(cudaEventRecord(compute_reached_, compute_));
  TACHYON_CUDA_CHECK(cudaStreamWaitEvent(stream_, compute_reached_, 0));
  TACHYON_CUDA_CHECK(cudaMemcpyAsync(device_slices_, staging.host, bytes, cudaMemcpyHostToDevice, stream_));
  TACHYON_CUDA_CHECK(cudaEventRecord(staging.uploaded, stream_));
  copy_swap_slices(device_slices_, static_cast<int64_t>(n), stream_);
  TACHYON_CUDA_CHECK(cudaEventRecord(copies_done_, stream_));
  TACHYON_CUDA_CHECK(cudaStreamWaitEvent(compute_, copies_done_, 0));
  ++launches_;
  slices_ += n;
  queue_.clear();
  queued_writes_.clear();
  queued_reads_.clear();
}

void HostSwap::wait() {
  issue();
  TACHYON_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

// ---- CudaBackend: host memory for swapped KV blocks

void* CudaBackend::allocate_host(size_t bytes) {
  void* p = cuda_malloc_host(std::max<size_t>(bytes, 1));
  // The swap kernel addresses pinned memory by its host address (unified addressing).
  cudaPointerAttributes attributes{};
  TACHYON_CUDA_CHECK(cudaPointerGetAttributes(&attributes, p));
  if (attributes.devicePointer != p) {
    cudaFreeHost(p);
    throw Error("pinned host memory is not mapped at its host address on this GPU (no unified addressing): the "
                "KV swap space needs it; run without --swap-space");
  }
  return p;
}

void CudaBackend::deallocate_host(void* ptr) {
  if (!ptr) return;
  if (swap_) swap_->wait();  // a queued or running copy may still read or write it
  TACHYON_CUDA_CHECK(cudaFreeHost(ptr));
}

void CudaBackend::swap_copy(std::span<const DeviceCopy> copies, bool to_host) {
  if (copies.empty()) return;
  OnDevice on(device_);
  if (!swap_) swap_ = std::make_unique<HostSwap>(stream_, device_);
  // Ops recorded for a step graph go first: the copies are ordered after them. With swaps queued
  // already, no op came since the flush before them (each op issues the queue): a flush now would
  // only issue the queue early.
  if (swap_->empty()) flush();
  swap_->add(copies, to_host);  // issued by the next op's settle()
}

}  // namespace tachyon::kernels::cuda
