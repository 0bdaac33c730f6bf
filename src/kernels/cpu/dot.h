// The canonical f32 reductions of the CPU backend. Every ISA implements them bit for bit,
// so results never depend on the ISA path, batch size, tiling or thread split:
//
//  - matmul: out[m, n] = fma(x[m, K-1], w[n, K-1], … fma(x[m, 0], w[n, 0], 0.f)), one
//    sequential fused chain over k per output (then + bias). Vector kernels put 8 outputs
//    in the 8 lanes of a register, so each lane is exactly this chain.
//  - dot_f32 (attention scores): 8 lanes, lane l accumulates a[k]·b[k] for k ≡ l (mod 8),
//    k < K8 = K - K % 8, with fma; then ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)); then the tail
//    k ≥ K8 one by one with fma.
#pragma once

#include <cmath>
#include <cstdint>

namespace tachyon::kernels::cpu {

inline float hsum8(const float lanes[8]) {
  const float s0 = lanes[0] + lanes[4], s1 = lanes[1] + lanes[5], s2 = lanes[2] + lanes[6], s3 = lanes[3] + lanes[7];
  return (s0 + s2) + (s1 + s3);
}

inline float dot_f32_portable_inline(const float* a, const float* b, int64_t k) {
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const int64_t k8 = k - k % 8;
  for (int64_t i = 0; i < k8; i += 8)
    for (int l = 0; l < 8; ++l) lanes[l] = std::fma(a[i + l], b[i + l], lanes[l]);
  float r = hsum8(lanes);
  for (int64_t i = k8; i < k; ++i) r = std::fma(a[i], b[i], r);
  return r;
}

}  // namespace tachyon::kernels::cpu
