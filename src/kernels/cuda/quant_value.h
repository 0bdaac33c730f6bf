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

// e2m1 magnitude bits (e1 e0 m) and sign bit 3: 0, 0.5, 1, 1.5, 2, 3, 4, 6.
TACHYON_HD float e2m1_value(uint32_t code) {
  const uint32_t e = (code >> 1) & 3u, m = code & 1u;
  const float mag = e == 0 ? 0.5f * static_cast<float>(m) : bits_to_f32(((e + 126u) << 23) | (m << 22));
  return (code & 8u) ? -mag : mag;
}

// e4m3fn (exact in f16).
TACHYON_HD float e4m3_value(uint32_t code) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3);
  return __half2float(__half(h));
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
