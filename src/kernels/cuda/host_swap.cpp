#include "kernels/cuda/host_swap.h"

#include "base/error.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_backend_impl.h"

namespace tachyon::kernels::cuda {

HostSwap::HostSwap() {
  TACHYON_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  TACHYON_CUDA_CHECK(cudaEventCreateWithFlags(&compute_reached_, cudaEventDisableTiming));
  TACHYON_CUDA_CHECK(cudaEventCreateWithFlags(&copies_done_, cudaEventDisableTiming));
}

HostSwap::~HostSwap() {
  cudaStreamSynchronize(stream_);
  cudaEventDestroy(compute_reached_);
  cudaEventDestroy(copies_done_);
  cudaStreamDestroy(stream_);
}

void HostSwap::copy(cudaStream_t compute, std::span<const Backend::DeviceCopy> copies, cudaMemcpyKind kind) {
  if (copies.empty()) return;
  TACHYON_CUDA_CHECK(cudaEventRecord(compute_reached_, compute));
  TACHYON_CUDA_CHECK(cudaStreamWaitEvent(stream_, compute_reached_, 0));
  for (const Backend::DeviceCopy& c : copies)
    TACHYON_CUDA_CHECK(cudaMemcpyAsync(c.dst, c.src, c.bytes, kind, stream_));
  TACHYON_CUDA_CHECK(cudaEventRecord(copies_done_, stream_));
  TACHYON_CUDA_CHECK(cudaStreamWaitEvent(compute, copies_done_, 0));
}

void HostSwap::wait() { TACHYON_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

// ---- CudaBackend: host memory for swapped KV blocks

void* CudaBackend::allocate_host(size_t bytes) {
  void* p = nullptr;
  TACHYON_CUDA_CHECK(cudaMallocHost(&p, std::max<size_t>(bytes, 1)));
  return p;
}

void CudaBackend::deallocate_host(void* ptr) {
  if (!ptr) return;
  if (swap_) swap_->wait();  // a copy may still read or write it
  TACHYON_CUDA_CHECK(cudaFreeHost(ptr));
}

void CudaBackend::swap_copy(std::span<const DeviceCopy> copies, bool to_host) {
  if (copies.empty()) return;
  // The engine thread issues every tensor-parallel rank's swaps: this backend's GPU is made
  // current for its stream and events, then the caller's again.
  int current = 0;
  TACHYON_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device_) TACHYON_CUDA_CHECK(cudaSetDevice(device_));
  flush();  // ops recorded for a step graph go first: the copies are ordered after them
  if (!swap_) swap_ = std::make_unique<HostSwap>();
  swap_->copy(stream_, copies, to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice);
  if (current != device_) TACHYON_CUDA_CHECK(cudaSetDevice(current));
}

}  // namespace tachyon::kernels::cuda
