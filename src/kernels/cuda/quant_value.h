// The f32 value of one quantized code (quant_layout.h's kinds), exactly the scalar definition of
// kernels/weight_dequant.h: host and device code, so that the CPU tests check the device's formulas
// (integer codes through the mantissa of 2^23 instead of a quarter-rate I2F conversion, e2m1 and
// e4m3 by their bits) against the definition for every code.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cuda/quant_layout.h"

namespace tachyon::kernels::cuda {

TACHYON_HD float bits_to_f32(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}

// Integers below 2^23 to f32: the integer in the mantissa of 2^23, minus 2^23 plus the code offset
// of signed formats (`offset`). Exact.
TACHYON_HD float small_uint_to_f32(uint32_t u, float offset) { return bits_to_f32(0x4b000000u | u) - offset; }

TACHYON_HD float fma_rn(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// The 8 codes of a 4-bit unit word (q[j]: slot j of lane_code) as f32, unsigned (Affine) or as
// two's complement (Symmetric: (q ^ 8) − 8), the values of small_uint_to_f32 for each code, in two
// operations per nibble instead of three: nibbles 0-4 are masked in place under 2^23's exponent
// (2^23 + q·16^n) and brought back by an exact fma with 16^−n (every operand and the result are
// exact: a small integer); nibbles 5-7 reach into the exponent bits, so they are shifted down
// first (one shift for the three).
template <bool kSigned>
TACHYON_HD void nibble_values(uint32_t word, float (&q)[8]) {
  if (kSigned) word ^= 0x88888888u;
  constexpr float kOffset = kSigned ? 8.f : 0.f;
  const uint32_t high = word >> 20;
  float n[8];  // by nibble
  n[0] = bits_to_f32(0x4b000000u | (word & 0xfu)) - (8388608.f + kOffset);
  n[1] = fma_rn(bits_to_f32(0x4b000000u | (word & 0xf0u)), 0x1p-4f, -(0x1p19f + kOffset));
  n[2] = fma_rn(bits_to_f32(0x4b000000u | (word & 0xf00u)), 0x1p-8f, -(0x1p15f + kOffset));
  n[3] = fma_rn(bits_to_f32(0x4b000000u | (word & 0xf000u)), 0x1p-12f, -(0x1p11f + kOffset));
  n[4] = fma_rn(bits_to_f32(0x4b000000u | (word & 0xf0000u)), 0x1p-16f, -(0x1p7f + kOffset));
  n[5] = bits_to_f32(0x4b000000u | (high & 0xfu)) - (8388608.f + kOffset);
  n[6] = fma_rn(bits_to_f32(0x4b000000u | (high & 0xf0u)), 0x1p-4f, -(0x1p19f + kOffset));
  n[7] = fma_rn(bits_to_f32(0x4b000000u | (high & 0xf00u)), 0x1p-8f, -(0x1p15f + kOffset));
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int j = 0; j < 8; ++j) q[j] = n[nibble_of_slot(j)];
}

// Whether, for every 4-bit code q, one bf16 rounding of the exact q·s + b (s and b: bf16 bits; b = 0
// for Symmetric) is quant_value's bf16_rn(fma_f32(q, s, b)), so that the pair decode
// (quant_common.cuh: fma.rn.bf16x2) gives the f32 decode's bits. It is where that f32 fma is exact:
// q·s + b is a multiple of 2^lo (the lowest significand bit of s or b) below 2^hi (|q·s| < 2^(top(s)
// + 4) for q < 16, the sum below twice the larger bound), so it needs hi − lo bits; at most 24 fit
// an f32, and hi <= 127 keeps it finite. b alone (s = 0) always fits. Non-finite s or b: false.
TACHYON_HD bool bf16_pair_exact(uint16_t s, uint16_t b) {
  const auto finite = [](uint16_t x) { return (x & 0x7f80u) != 0x7f80u; };
  if (!finite(s) || !finite(b)) return false;
  if ((s & 0x7fffu) == 0) return true;
  const auto exponent = [](uint16_t x) { const int e = (x >> 7) & 0xff; return (e == 0 ? 1 : e) - 127; };
  const int top_s = exponent(s) + 1, top_b = exponent(b) + 1;  // |x| < 2^top
  const bool no_b = (b & 0x7fffu) == 0;
  const int hi = (no_b || top_s + 4 > top_b ? top_s + 4 : top_b) + 1;
  const int lo = (no_b || exponent(s) < exponent(b) ? exponent(s) : exponent(b)) - 7;  // bf16: 7 bits below the top
  return hi - lo <= 24 && hi <= 127;
}

// The 4 bytes of an 8-bit unit word (byte j: slot j % 4 of lane_code) as f32, unsigned (Affine) or
// two's complement (Symmetric, Dense I8: (q ^ 0x80) − 128), the values of small_uint_to_f32: on the
// device one byte permute puts byte j under 2^23's exponent (0x4b0000BB), then one subtraction.
template <bool kSigned>
TACHYON_HD void byte_values(uint32_t word, float (&q)[4]) {
  if (kSigned) word ^= 0x80808080u;
  constexpr float kOffset = kSigned ? 8388736.f : 8388608.f;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int j = 0; j < 4; ++j) {
#ifdef __CUDA_ARCH__
    // Result bytes: word's byte j, then bytes 4, 4, 7 of {0x4b000000 : word}.
    const uint32_t bits = __byte_perm(word, 0x4b000000u, 0x7440u | static_cast<uint32_t>(j));
#else
    const uint32_t bits = 0x4b000000u | ((word >> (8 * j)) & 0xffu);
#endif
    q[j] = bits_to_f32(bits) - kOffset;
  }
}

// e2m1 magnitude bits (e1 e0 m) and sign bit 3: 0, 0.5, 1, 1.5, 2, 3, 4, 6.
TACHYON_HD float e2m1_value(uint32_t code) {
  const uint32_t e = (code >> 1) & 3u, m = code & 1u;
  const float mag = e == 0 ? 0.5f * static_cast<float>(m) : bits_to_f32(((e + 126u) << 23) | (m << 22));
  return (code & 8u) ? -mag : mag;
}

// The 8 e2m1 codes of a 4-bit unit word (q[j]: slot j), e2m1_value's values without its
// branches: the magnitude bits e1 e0 m placed as an f32's lowest exponent bits and its top mantissa
// bit are the value times 2^−126 (e = 0: the subnormal m·2^−127), the sign bit moves to bit 31,
// and one exact multiplication by 2^126 gives the value (subnormals are kept: no flush to zero).
TACHYON_HD void e2m1_values(uint32_t word, float (&q)[8]) {
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int j = 0; j < 8; ++j) {
    const uint32_t code = (word >> (4 * nibble_of_slot(j))) & 0xfu;
    q[j] = bits_to_f32(((code & 7u) << 22) | ((code & 8u) << 28)) * 0x1p126f;
  }
}

// e4m3fn (exact in f16).
TACHYON_HD float e4m3_value(uint32_t code) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3);
  return __half2float(__half(h));
}

// Two e4m3fn codes, the low and the high byte of `pair`, by one paired conversion (the device's
// single conversion is that instruction with half its result unused): e4m3_value's values.
TACHYON_HD void e4m3_pair_values(uint32_t pair, float& low, float& high) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair & 0xffffu), __NV_E4M3);
  __half_raw l, u;
  l.x = h.x, u.x = h.y;
  low = __half2float(__half(l)), high = __half2float(__half(u));
}

// A product rounded once (no contraction into a later add on the device).
TACHYON_HD float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// The f32 value of a code with its group's scale s and bias b (Affine only), by kind. Int8Rows:
// the code alone (its row scale multiplies the reduced output). Single roundings of exact operands,
// as in weight_dequant.h (Affine: one fma).
template <int kKind>
TACHYON_HD float quant_value(uint32_t code, float s, float b) {
  if constexpr (kKind == kQuantAffine4 || kKind == kQuantAffine8) {
    return std::fma(small_uint_to_f32(code, 8388608.f), s, b);
  } else if constexpr (kKind == kQuantSymmetric4) {
    return mul_rn(small_uint_to_f32(code ^ 8u, 8388616.f), s);  // (q ^ 8) − 8: two's complement
  } else if constexpr (kKind == kQuantSymmetric8) {
    return mul_rn(small_uint_to_f32(code ^ 0x80u, 8388736.f), s);
  } else if constexpr (kKind == kQuantFp8) {
    return mul_rn(e4m3_value(code), s);
  } else if constexpr (kKind == kQuantMxfp4) {
    return mul_rn(e2m1_value(code), s);
  } else {
    return small_uint_to_f32(code ^ 0x80u, 8388736.f);
  }
}

}  // namespace tachyon::kernels::cuda
