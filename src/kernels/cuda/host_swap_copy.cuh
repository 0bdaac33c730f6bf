// The copy kernel of the KV host tier (host_swap.h): many slices between device memory and
// pinned host memory in one launch. Pinned memory from cudaMallocHost is mapped into the device's
// address space at its host address (unified addressing), so a kernel reads and writes it over
// the bus directly: one launch moves every block's layer slices of a step, where one
// cudaMemcpyAsync per slice paid a few microseconds of issue each (2 x layers per block).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tachyon::kernels::cuda {

struct SwapSlice {
  void* dst;
  const void* src;
  uint64_t bytes;
};

// Copies slices[i] for every i < n, one CTA per slice (16-byte units where the slice's ends and
// size allow, else 4-byte words, else bytes); `slices` is device memory. The slices must not
// overlap one another's destinations or write another's source: they run in any order.
void copy_swap_slices(const SwapSlice* slices, int64_t n, cudaStream_t stream);

}  // namespace tachyon::kernels::cuda
