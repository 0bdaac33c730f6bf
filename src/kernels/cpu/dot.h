// The canonical f32 reduction of the CPU backend. Every dot product (matmul rows,
// attention scores) reduces in this order whatever the ISA, batch size or tiling:
//   8 lanes, lane l accumulates x[k]·w[k] for k ≡ l (mod 8), k < K8 = K - K % 8, with fused
//   multiply-add; then ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)); then the tail k ≥ K8 one by
//   one with fma. The AVX2 kernels and the portable fallback produce identical bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "base/dtype.h"

namespace tachyon::kernels::cpu {

inline float hsum8(const float lanes[8]) {
  const float s0 = lanes[0] + lanes[4], s1 = lanes[1] + lanes[5], s2 = lanes[2] + lanes[6], s3 = lanes[3] + lanes[7];
  return (s0 + s2) + (s1 + s3);
}

template <typename LoadW>
inline float dot_portable(const float* x, LoadW load_w, int64_t k) {
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const int64_t k8 = k - k % 8;
  for (int64_t i = 0; i < k8; i += 8)
    for (int l = 0; l < 8; ++l) lanes[l] = std::fma(x[i + l], load_w(i + l), lanes[l]);
  float r = hsum8(lanes);
  for (int64_t i = k8; i < k; ++i) r = std::fma(x[i], load_w(i), r);
  return r;
}

}  // namespace tachyon::kernels::cpu
