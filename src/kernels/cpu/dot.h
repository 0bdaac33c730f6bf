// The canonical f32 reductions of the CPU backend. Every ISA implements them bit for bit,
// so results never depend on the ISA path, batch size, tiling or thread split:
//
//  - matmul: out[m, n] = fma(x[m, K-1], w[n, K-1], … fma(x[m, 0], w[n, 0], 0.f)), one
//    sequential fused chain over k per output (then + bias). Vector kernels put 8 outputs
//    in the 8 lanes of a register, so each lane is exactly this chain.
//    Quantized weights (kernels/weight.h formats) take part as w[n, k] = the f32 value of their
//    scalar definition (kernels/weight_dequant.h: fma(q, s, b), q · s, e4m3(q) · s,
//    e2m1(q) · 2^e), computed exactly by every path (in registers, or once into an f32 panel),
//    then the same chain; the reference backend reads the same values. Dense I8 (a
//    drafter's or --quantize int8) is the exception kept from before: the chain runs on the
//    raw int8 values and each output is then × its row's scale.
//  - dot_f32 (attention scores): 8 lanes, lane l accumulates a[k]·b[k] for k ≡ l (mod 8),
//    k < K8 = K - K % 8, with fma; then ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)); then the tail
//    k ≥ K8 one by one with fma.
//  - exp_canonical (softmax): round-to-nearest n = x·log2(e) by the 1.5·2^23 trick, Cody–Waite
//    r = x − n·ln2 in two fma steps, the degree-7 Cephes polynomial by fma, times 2^n; 0 below
//    −87. Written without branches or library calls so that vector code computes the same bits.
#pragma once

#include <bit>
#include <algorithm>
#include <cmath>
#include <cstdint>
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace tachyon::kernels::cpu {
// Internal linkage: each ISA file compiles these with its own flags, and one merged
// (non-FMA) copy must not replace the others at link time.
namespace {

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

// dot_f32 in the canonical order, vectorised where the including file is compiled for AVX2.
inline float dot_canonical(const float* a, const float* b, int64_t k) {
#if defined(__AVX2__) && defined(__FMA__)
  __m256 acc = _mm256_setzero_ps();
  const int64_t k8 = k - k % 8;
  for (int64_t t = 0; t < k8; t += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + t), _mm256_loadu_ps(b + t), acc);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  float r = hsum8(lanes);
  for (int64_t t = k8; t < k; ++t) r = std::fma(a[t], b[t], r);
  return r;
#else
  return dot_f32_portable_inline(a, b, k);
#endif
}

// e^x for x <= 88 (softmax arguments are <= 0), relative error ~1e-7.
inline float exp_canonical(float x) {
  const float xc = std::max(x, -87.f);
  const float n = (xc * 1.44269504088896341f + 12582912.f) - 12582912.f;
  float r = std::fma(n, -0.693145751953125f, xc);
  r = std::fma(n, -1.428606765330187045e-6f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  const float y = std::fma(p, r * r, r) + 1.f;
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return x < -87.f ? 0.f : y * scale;
}

}  // namespace
}  // namespace tachyon::kernels::cpu
