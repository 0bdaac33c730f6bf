// AVX-512 decoders of KV records (kernels/kv_format.h) into f32, 16 elements per step: the
// same single operation per element as kv_dequantize (kernels/kv_quant.h), so the values are
// bit-identical to the scalar definition. Included only by AVX-512 translation units.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/kv_quant.h"

namespace tachyon::kernels::cpu {
namespace {

// An f16 param as f32 by the F16C instruction (exact, as f16_to_f32), without a call per group.
inline float f16_param(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// 16 nibbles (8 bytes, element 2i low, 2i + 1 high) as 16 int32 lanes in element order.
inline __m512i nibbles16(const uint8_t* p) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m128i lo = _mm_and_si128(b, _mm_set1_epi8(0x0f));
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0x0f));
  return _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi));
}

// out[0..d) = the record's values. Tails past a multiple of 16 use the scalar definition.
inline void decode_kv_avx512(KvCodec codec, const uint8_t* codes, const uint8_t* params, int64_t d, float* out) {
  const int64_t d16 = d - d % 16;
  switch (codec) {
    case KvCodec::F32:
      std::memcpy(out, codes, static_cast<size_t>(d) * 4);
      return;
    case KvCodec::BF16:
      for (int64_t i = 0; i < d16; i += 16) {
        const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 2 * i)));
        _mm512_storeu_ps(out + i, _mm512_castsi512_ps(_mm512_slli_epi32(h, 16)));
      }
      break;
    case KvCodec::F16:
      for (int64_t i = 0; i < d16; i += 16)
        _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 2 * i))));
      break;
    case KvCodec::FP8: {
      // e4m3 bits e·m placed at f32 bits 20..26 are the value · 2^-120 (normal and subnormal
      // codes alike); · 2^120 is exact. The quantizer never writes the NaN code 0x7f.
      const __m512 scale = _mm512_set1_ps(kv_load_f32(params)), pow120 = _mm512_set1_ps(0x1p120f);
      for (int64_t i = 0; i < d16; i += 16) {
        const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i)));
        const __m512i mag = _mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x7f)), 20);
        const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x80)), 24);
        const __m512 v = _mm512_mul_ps(_mm512_castsi512_ps(mag), pow120);
        _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), sign)), scale));
      }
      break;
    }
    case KvCodec::U8Affine:
      for (int64_t i = 0; i < d16; i += 16) {
        const uint8_t* p = params + 8 * (i / kInt8Group);
        const __m512 c = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i))));
        _mm512_storeu_ps(out + i, _mm512_fmadd_ps(c, _mm512_set1_ps(kv_load_f32(p)), _mm512_set1_ps(kv_load_f32(p + 4))));
      }
      break;
    case KvCodec::U4Affine:
      for (int64_t i = 0; i < d16; i += 16) {
        const uint8_t* p = params + 4 * (i / kInt4Group);
        const __m512 c = _mm512_cvtepi32_ps(nibbles16(codes + i / 2));
        _mm512_storeu_ps(out + i, _mm512_fmadd_ps(c, _mm512_set1_ps(f16_param(p)), _mm512_set1_ps(f16_param(p + 2))));
      }
      break;
    case KvCodec::TurboK8: {
      const __m512 f = _mm512_set1_ps(kv_load_f32(params));
      for (int64_t i = 0; i < d16; i += 16) {
        const __m512 c = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i))));
        _mm512_storeu_ps(out + i, _mm512_mul_ps(c, f));
      }
      break;
    }
    case KvCodec::LloydMaxV4: {
      const __m512 levels = _mm512_loadu_ps(kLloydMax4);
      for (int64_t i = 0; i < d16; i += 16) {
        const uint8_t* p = params + 4 * (i / kLloydMaxGroup);
        const __m512 level = _mm512_permutexvar_ps(nibbles16(codes + i / 2), levels);
        _mm512_storeu_ps(out + i, _mm512_fmadd_ps(_mm512_set1_ps(f16_param(p + 2)), level, _mm512_set1_ps(f16_param(p))));
      }
      break;
    }
  }
  if (d16 < d) {  // the scalar definition of the tail elements
    thread_local std::vector<float> tail;
    tail.resize(static_cast<size_t>(d));
    kv_dequantize(codec, codes, params, d, tail.data());
    std::memcpy(out + d16, tail.data() + d16, static_cast<size_t>(d - d16) * 4);
  }
}

}  // namespace
}  // namespace tachyon::kernels::cpu
