// Reductions over one CTA of blockDim.x threads (a multiple of 32, at most 1024), each in one
// fixed order, so a row's result does not depend on anything but the row.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace tachyon::kernels::cuda {

#ifdef __CUDACC__
// Keeps (v, i) the better of the two: the larger value, among equal values the lower index.
__device__ __forceinline__ void better(float& v, int& i, float ov, int oi) {
  if (ov > v || (ov == v && oi < i)) v = ov, i = oi;
}

// The index of the first maximum of row[0, n) (0 for a row without a comparable value). Every
// thread of the CTA calls it; the result is returned to all.
__device__ __forceinline__ int block_argmax(const float* __restrict__ row, int64_t n) {
  __shared__ float vs[32];
  __shared__ int is[32];
  float v = -INFINITY;
  int best = 0x7fffffff;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) better(v, best, row[c], static_cast<int>(c));
  for (int o = 16; o > 0; o >>= 1) better(v, best, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, best, o));
  if (threadIdx.x % 32 == 0) vs[threadIdx.x / 32] = v, is[threadIdx.x / 32] = best;
  __syncthreads();
  const unsigned lane = threadIdx.x % 32;  // every warp reduces the warps' results alike
  v = lane < blockDim.x / 32 ? vs[lane] : -INFINITY;
  best = lane < blockDim.x / 32 ? is[lane] : 0x7fffffff;
  for (int o = 16; o > 0; o >>= 1) better(v, best, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, best, o));
  __syncthreads();  // vs / is reusable
  return best == 0x7fffffff ? 0 : best;
}

// Sum of every thread's value (integer: exact, any order); returned to all threads.
template <typename T>
__device__ __forceinline__ T block_sum(T v) {
  __shared__ T partial[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  T total = 0;
  for (unsigned w = 0; w < blockDim.x / 32; ++w) total += partial[w];
  __syncthreads();  // partial reusable
  return total;
}

// Maximum of every thread's value; returned to all threads.
__device__ __forceinline__ float block_max(float v) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  float m = partial[0];
  for (unsigned w = 1; w < blockDim.x / 32; ++w) m = fmaxf(m, partial[w]);
  __syncthreads();
  return m;
}
#endif

}  // namespace tachyon::kernels::cuda
