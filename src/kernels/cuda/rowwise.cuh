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
