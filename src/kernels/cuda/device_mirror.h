// Device copies of the host arrays ops read (positions, block tables, ids): DeviceMirror. Its .cpp
// also holds the CUDA backend's members that put weights and buffers on the device and move
// bytes between host and device (upload_weight, workspaces, copies).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tachyon::kernels::cuda {

// Device copies of host arrays, found again by content: a step's layers pass the same
// positions and block tables, which then cross the bus once per step.
class DeviceMirror {
 public:
  explicit DeviceMirror(cudaStream_t stream) : stream_(stream) {}
  ~DeviceMirror() {
    for (auto& s : slots_)
      if (s.device) cudaFree(s.device);
  }
  // A device copy of host[0, bytes), stream-ordered before the next op; null for 0 bytes.
  const void* get(const void* host, size_t bytes);
  template <typename T>
  const T* get(const T* host, size_t n) {
    return static_cast<const T*>(get(static_cast<const void*>(host), n * sizeof(T)));
  }

 private:
  struct Slot {
    std::vector<std::byte> host;
    void* device = nullptr;
    size_t capacity = 0;
    uint64_t last_use = 0;
  };
  cudaStream_t stream_;
  std::array<Slot, 16> slots_{};
  uint64_t clock_ = 0;
};

}  // namespace tachyon::kernels::cuda
