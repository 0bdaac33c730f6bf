// The per-element arithmetic of RMSNorm and RoPE, shared by the kernels that apply them alone
// (norm.cu, rope.cu) and the fused attention prologue (attention.cu), so that fused and
// unfused paths compute the same bits by construction.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace tachyon::kernels::cuda {

#ifdef __CUDACC__
// Sum of squares of a row held lane-strided by one warp (lane l holds elements l, l + 32, ...;
// zero past the row), in one fixed order: per lane in j order, then the butterfly.
template <int N>
__device__ __forceinline__ float warp_sum_squares(const float (&v)[N]) {
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < N; ++j) sum = fmaf(v[j], v[j], sum);
  return warp_sum(sum);
}
__device__ __forceinline__ float inv_rms(float sum_squares, int dim, float eps) {
  return 1.f / sqrtf(sum_squares / static_cast<float>(dim) + eps);
}
__device__ __forceinline__ float rms_scaled(float x, float inv, float w, float weight_offset) {
  return (weight_offset + w) * (x * inv);
}
// The wide RMSNorm (one 256-thread group per row; thread t holds the float4s t, t + 256, ... of
// the row, zero past it): a thread's sum of squares in j order. The group then adds the warps'
// butterfly sums in warp order (norm.cu, and the streaming matmul's fused norm).
constexpr int kWideNormThreads = 256;
constexpr int kWideMaxVec = 8;  // rows up to 4 x 256 x 8 = 8192
__device__ __forceinline__ float thread_sum_squares(const float4 (&v)[kWideMaxVec]) {
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < kWideMaxVec; ++j) {
    sum = fmaf(v[j].x, v[j].x, sum);
    sum = fmaf(v[j].y, v[j].y, sum);
    sum = fmaf(v[j].z, v[j].z, sum);
    sum = fmaf(v[j].w, v[j].w, sum);
  }
  return sum;
}
// Row x + y as the wide norm holds it (zero past `vecs` float4s): add_rms_norm's residual add.
__device__ __forceinline__ void load_added_row4(const float4* x, const float4* y, int vecs,
                                                float4 (&v)[kWideMaxVec]) {
#pragma unroll
  for (int j = 0; j < kWideMaxVec; ++j) {
    const int i = threadIdx.x + kWideNormThreads * j;
    if (i < vecs) {
      const float4 a = x[i], b = y[i];
      v[j] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    } else {
      v[j] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
}
__device__ __forceinline__ float sum_in_warp_order(const float* warp_sums) {
  float total = 0.f;
  for (int i = 0; i < kWideNormThreads / 32; ++i) total += warp_sums[i];
  return total;
}
__device__ __forceinline__ float4 rms_scaled4(float4 x, float inv, float4 w, float weight_offset) {
  return make_float4(rms_scaled(x.x, inv, w.x, weight_offset), rms_scaled(x.y, inv, w.y, weight_offset),
                     rms_scaled(x.z, inv, w.z, weight_offset), rms_scaled(x.w, inv, w.w, weight_offset));
}
// One rotated pair (x1, x2) of RoPE at angle position · inv_freq.
__device__ __forceinline__ void rope_rotate(float& x1, float& x2, int32_t position, float inv_freq, float scaling) {
  const float freq = static_cast<float>(position) * inv_freq;
  const float c = cosf(freq) * scaling, s = sinf(freq) * scaling;
  const float a = x1, b = x2;
  x1 = a * c + (-b) * s;
  x2 = b * c + a * s;
}
#endif

}  // namespace tachyon::kernels::cuda
