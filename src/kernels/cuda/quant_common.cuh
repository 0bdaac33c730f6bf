// Device side of quantized weights (quant_layout.h): scale loads, code lookups and one lane's B
// fragment of a unit, on quant_value.h's arithmetic, shared by the decode matmul, the dequantizing
// copy (prefill, MoE) and the embedding so that they agree bit for bit. Internal to src/kernels/cuda.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/quant_layout.h"
#include "kernels/cuda/quant_value.h"

namespace tachyon::kernels::cuda {

__device__ __forceinline__ float load_quant_scale(const void* p, int type, int64_t i) {
  if (type == kScaleF32) return __ldg(static_cast<const float*>(p) + i);
  const unsigned short bits = __ldg(static_cast<const unsigned short*>(p) + i);
  if (type == kScaleF16) return __half2float(__ushort_as_half(bits));
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

__device__ __forceinline__ uint32_t quant_code(const QuantMatrix& m, int64_t r, int64_t c) {
  int shift = 0;
  const int64_t byte = m.code_byte(r, c, shift);
  return (static_cast<uint32_t>(__ldg(static_cast<const unsigned char*>(m.codes) + byte)) >> shift) &
         (m.bits() == 8 ? 0xffu : 0xfu);
}

// Element (r, c) of an uploaded matrix (rows and columns padded: zero there), kind kKind; Int8Rows
// without its row scale.
template <int kKind>
__device__ __forceinline__ float quant_element(const QuantMatrix& m, int64_t r, int64_t c) {
  const uint32_t code = quant_code(m, r, c);
  if constexpr (kKind == kQuantInt8Rows) {
    return quant_value<kKind>(code, 1.f, 0.f);
  } else {
    const int64_t si = m.scale_index(r, c);
    const float s = load_quant_scale(m.scales, m.scale_type, si);
    const float b =
        (kKind == kQuantAffine4 || kKind == kQuantAffine8) ? load_quant_scale(m.biases, m.scale_type, si) : 0.f;
    return quant_value<kKind>(code, s, b);
  }
}

// One lane's B fragment of one 32-column unit (kernels' order: b[2t + h] holds columns
// 16t + 8h + 2(lane % 4) + {0, 1} of the lane's row): the unit's 8 codes from the lane's 16-byte
// vector `words` (slot `unit_in_vector`), dequantized with the scale s[t] (and bias b[t]) of
// half t's group and rounded to bf16 pairs.
template <int kKind>
__device__ __forceinline__ void quant_fragment(const uint32_t (&words)[4], int unit_in_vector, const float (&s)[2],
                                               const float (&bias)[2], uint32_t (&b)[4]) {
  constexpr int kBits = quant_kind_bits(kKind);
  if constexpr (kKind == kQuantAffine4 || kKind == kQuantSymmetric4) {
    // quant_value's arithmetic on nibble_values' codes (the same f32 values, fewer operations).
    float q[8];
    nibble_values<kKind == kQuantSymmetric4>(words[unit_in_vector], q);
    const auto value = [&](int j, int t) {
      return kKind == kQuantAffine4 ? fma_rn(q[j], s[t], bias[t]) : mul_rn(q[j], s[t]);
    };
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h) b[2 * t + h] = pack_bf16x2(value(4 * t + 2 * h, t), value(4 * t + 2 * h + 1, t));
  } else if constexpr (kKind == kQuantAffine8 || kKind == kQuantSymmetric8 || kKind == kQuantInt8Rows) {
    // quant_value's arithmetic on byte_values' codes (the same f32 values, one permute each).
    constexpr bool kAffine8 = kKind == kQuantAffine8;
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      float q[4];  // codes 4t .. 4t + 3: one word
      byte_values<!kAffine8>(words[unit_in_vector * 2 + t], q);
      const auto value = [&](int i) {
        if constexpr (kAffine8) return fma_rn(q[i], s[t], bias[t]);
        if constexpr (kKind == kQuantSymmetric8) return mul_rn(q[i], s[t]);
        return q[i];
      };
#pragma unroll
      for (int h = 0; h < 2; ++h) b[2 * t + h] = pack_bf16x2(value(2 * h), value(2 * h + 1));
    }
  } else if constexpr (kKind == kQuantMxfp4) {
    float q[8];  // quant_value's product on e2m1_values' codes
    e2m1_values(words[unit_in_vector], q);
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        b[2 * t + h] = pack_bf16x2(mul_rn(q[4 * t + 2 * h], s[t]), mul_rn(q[4 * t + 2 * h + 1], s[t]));
  } else if constexpr (kKind == kQuantFp8) {
    // Codes j and j + 1 (j even) are neighbouring bytes of one word: one paired conversion.
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int j = 4 * t + 2 * h;
        float lo, hi;
        e4m3_pair_values(words[unit_in_vector * 2 + j / 4] >> (8 * (j % 4)), lo, hi);
        b[2 * t + h] = pack_bf16x2(mul_rn(lo, s[t]), mul_rn(hi, s[t]));
      }
  } else {
#pragma unroll
    for (int t = 0; t < 2; ++t) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int j = 4 * t + 2 * h;
        b[2 * t + h] = pack_bf16x2(quant_value<kKind>(lane_code(words, unit_in_vector, j, kBits), s[t], bias[t]),
                                   quant_value<kKind>(lane_code(words, unit_in_vector, j + 1, kBits), s[t], bias[t]));
      }
    }
  }
}

// fma.rn.bf16x2: per half, one rounding of the exact a·b + c (subnormals kept).
__device__ __forceinline__ uint32_t fma_bf16x2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// A bf16 value in both halves of a bf16x2.
__device__ __forceinline__ uint32_t bf16_pair_of(unsigned short bits) { return bits * 0x10001u; }

// quant_fragment of a 4-bit unit word of a matrix with bf16_pairs (Affine4 or Symmetric4, bf16
// scales), in bf16 pairs: the fragment's pair p (slots 2p, 2p + 1) is nibbles p and p + 4
// (quant_layout.h), masked under the bf16 of 128 in both halves at once (0x4300 | q is 128 + q),
// brought to q (Symmetric: (q ^ 8) − 8) by an exact fma, then one fma.bf16x2 with half t's scale
// pair s2[t] (bf16_pair_of) and bias pair b2[t] (Symmetric: −0, so the product alone): bf16_rn of the
// exact q·s + b, which bf16_pair_exact made quant_fragment's bits. Four operations per pair where
// the f32 decode takes seven.
template <int kKind>
__device__ __forceinline__ void quant_pair_fragment(uint32_t word, const uint32_t (&s2)[2], const uint32_t (&b2)[2],
                                                    uint32_t (&b)[4]) {
  static_assert(kKind == kQuantAffine4 || kKind == kQuantSymmetric4, "4-bit integer codes");
  constexpr bool kSigned = kKind == kQuantSymmetric4;
  if (kSigned) word ^= 0x88888888u;
  constexpr uint32_t kOnes = 0x3f803f80u, kOffset = kSigned ? 0xc308c308u : 0xc300c300u;  // 1; −136 or −128
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const uint32_t biased = ((word >> (4 * p)) & 0x000f000fu) | 0x43004300u;
    const uint32_t q = fma_bf16x2(biased, kOnes, kOffset);
    b[p] = fma_bf16x2(q, s2[p / 2], kSigned ? 0x80008000u : b2[p / 2]);
  }
}

// quant_fragment with the scales (and biases) loaded from global memory: `unit` is the unit's
// index in the row (32 columns each); scale_base = w.scale_base(row).
template <int kKind>
__device__ __forceinline__ void quant_unit_fragment(const QuantMatrix& w, const uint32_t (&words)[4],
                                                    int unit_in_vector, int64_t unit, int64_t scale_base,
                                                    int group_shift, uint32_t (&b)[4]) {
  constexpr bool kAffine = kKind == kQuantAffine4 || kKind == kQuantAffine8;
  float s[2] = {1.f, 1.f}, bias[2] = {0.f, 0.f};
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    if constexpr (kKind != kQuantInt8Rows) {
      const int64_t si = scale_base + (((unit * 32 + 16 * t) >> group_shift) << 3);
      s[t] = load_quant_scale(w.scales, w.scale_type, si);
      if constexpr (kAffine) bias[t] = load_quant_scale(w.biases, w.scale_type, si);
    }
  }
  quant_fragment<kKind>(words, unit_in_vector, s, bias, b);
}

// Calls fn(std::integral_constant<int, kind>) for m.kind: the runtime kind to a template argument.
template <typename Fn>
void with_quant_kind(int kind, Fn&& fn) {
  switch (kind) {
    case kQuantAffine4:
      return fn(std::integral_constant<int, kQuantAffine4>{});
    case kQuantAffine8:
      return fn(std::integral_constant<int, kQuantAffine8>{});
    case kQuantSymmetric4:
      return fn(std::integral_constant<int, kQuantSymmetric4>{});
    case kQuantSymmetric8:
      return fn(std::integral_constant<int, kQuantSymmetric8>{});
    case kQuantFp8:
      return fn(std::integral_constant<int, kQuantFp8>{});
    case kQuantMxfp4:
      return fn(std::integral_constant<int, kQuantMxfp4>{});
    case kQuantInt8Rows:
      return fn(std::integral_constant<int, kQuantInt8Rows>{});
    default:
      fail_unsupported("quantized weight kind", kind);
  }
}

}  // namespace tachyon::kernels::cuda
