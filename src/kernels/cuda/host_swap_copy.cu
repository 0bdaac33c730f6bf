#include "kernels/cuda/common.cuh"
#include "kernels/cuda/host_swap_copy.cuh"

namespace tachyon::kernels::cuda {

namespace {

template <typename Unit>
__device__ __forceinline__ void copy_units(void* dst, const void* src, uint64_t count) {
  auto* d = static_cast<Unit*>(dst);
  const auto* s = static_cast<const Unit*>(src);
  for (uint64_t i = threadIdx.x; i < count; i += blockDim.x) d[i] = s[i];
}

__global__ void copy_swap_slices_kernel(const SwapSlice* __restrict__ slices) {
  const SwapSlice c = slices[blockIdx.x];
  const uint64_t ends = reinterpret_cast<uintptr_t>(c.dst) | reinterpret_cast<uintptr_t>(c.src) | c.bytes;
  if (ends % 16 == 0) copy_units<uint4>(c.dst, c.src, c.bytes / 16);
  else if (ends % 4 == 0) copy_units<uint32_t>(c.dst, c.src, c.bytes / 4);
  else copy_units<uint8_t>(c.dst, c.src, c.bytes);
}

}  // namespace

void copy_swap_slices(const SwapSlice* slices, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  copy_swap_slices_kernel<<<static_cast<unsigned>(n), 256, 0, stream>>>(slices);
  TACHYON_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tachyon::kernels::cuda
