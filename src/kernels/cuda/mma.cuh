// Device primitives shared by the matmul kernels (matmul.cu, grouped_matmul.cu): the one MMA
// they all chain (so every kernel computes the same bits) and the streaming weight load.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace tachyon::kernels::cuda {

// d += a · b for one m16n8k16 tile (bf16 in, f32 accumulate).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// x[r, k..k+1] as a bf16 pair (the matmul input rounding); zero outside [M, K) (K is even).
__device__ __forceinline__ uint32_t load_x_pair(const float* __restrict__ x, int M, int K, int r, int k) {
  if (r >= M || k >= K) return 0u;
  const float2 v = *reinterpret_cast<const float2*>(x + static_cast<int64_t>(r) * K + k);
  return pack_bf16x2(v.x, v.y);
}

// Weights are read once per step: keep them out of L1.
__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p));
  return r;
}

}  // namespace tachyon::kernels::cuda
