// Helpers the AVX-512 VNNI and AMX int8-activation kernels share (cpu/isa/matmul_int8.h); only
// for files compiled with AVX-512 flags. Internal linkage, as in cpu/dot.h.
#pragma once

#include <immintrin.h>

#include "kernels/cpu/isa/matmul_int8.h"
#include "kernels/weight_dequant.h"

namespace tachyon::kernels::cpu {
namespace {

constexpr int64_t kPanel64 = Weight::kPanel;

// 16 scales (or biases) of a panel as stored, to f32 (F16 by vcvtph2ps, BF16 by a shift).
template <DType S>
inline __m512 load_scales16(const void* base, int64_t index) {
  if constexpr (S == DType::F32) return _mm512_loadu_ps(static_cast<const float*>(base) + index);
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + index));
  if constexpr (S == DType::F16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// The scales (or biases) of one panel in any Panel64Dot storage: as stored (load_scales16) or
// factored (S = I8: int8 multipliers times one F32 factor per 256 columns, weight.h), 16 outputs
// at a time, as f32 bit for bit what the portable kernel reads (weight_dequant.h group_value).
template <DType S>
struct PanelValues {
  const void* values;
  const float* factors = nullptr;
  int64_t factor_base = 0;  // the panel's first factor entry
  PanelValues(const Weight& w, const void* v, int64_t panel) : values(v) {
    if constexpr (S == DType::I8) {
      factors = reinterpret_cast<const float*>(static_cast<const uint8_t*>(v) + factor_offset(w));
      factor_base = panel * (w.cols / kFactorSpan) * kPanel64;
    }
  }
  // Outputs [16j, 16j + 16) of the group entry `index` (the panel's entry of output 0 plus 16j
  // is index) at column `column`.
  __m512 load16(int64_t index, int64_t column, int j) const {
    if constexpr (S == DType::I8) {
      const __m128i m = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const int8_t*>(values) + index));
      const __m512 f = _mm512_loadu_ps(factors + factor_base + (column / kFactorSpan) * kPanel64 + 16 * j);
      return _mm512_mul_ps(f, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(m)));
    } else {
      (void)column;
      (void)j;
      return load_scales16<S>(values, index);
    }
  }
};

}  // namespace
}  // namespace tachyon::kernels::cpu
