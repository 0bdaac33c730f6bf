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
// thread of the CTA calls it; the result is returned to all. `better` orders (value, index)
// pairs totally, so the result does not depend on the order the elements are visited in: a
// 16-byte aligned row goes by float4, kBatch loads in flight per thread (one load per loop trip
// waited for each in turn: 38 us of a decode step over a 152k vocabulary, docs/perf/cuda.md),
// the rest one by one.
__device__ __forceinline__ int block_argmax(const float* __restrict__ row, int64_t n) {
  __shared__ float vs[32];
  __shared__ int is[32];
  float v = -INFINITY;
  int best = 0x7fffffff;
  int64_t scalar_from = 0;
  if (reinterpret_cast<uintptr_t>(row) % 16 == 0) {
    constexpr int kBatch = 8;
    const int64_t n4 = n / 4;
    const auto* row4 = reinterpret_cast<const float4*>(row);
    for (int64_t base = threadIdx.x; base < n4; base += kBatch * static_cast<int64_t>(blockDim.x)) {
      float4 q[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int64_t c = base + static_cast<int64_t>(j) * blockDim.x;
        q[j] = c < n4 ? row4[c] : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int64_t c = base + static_cast<int64_t>(j) * blockDim.x;
        if (c >= n4) break;
        const int i = static_cast<int>(4 * c);
        better(v, best, q[j].x, i), better(v, best, q[j].y, i + 1);
        better(v, best, q[j].z, i + 2), better(v, best, q[j].w, i + 3);
      }
    }
    scalar_from = 4 * n4;
  }
  for (int64_t c = scalar_from + threadIdx.x; c < n; c += blockDim.x) better(v, best, row[c], static_cast<int>(c));
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
