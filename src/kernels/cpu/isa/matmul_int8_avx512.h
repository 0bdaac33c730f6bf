// Helpers the AVX-512 VNNI and AMX int8-activation kernels share (cpu/isa/matmul_int8.h); only
// for files compiled with AVX-512 flags. Internal linkage, as in cpu/dot.h.
#pragma once

#include <immintrin.h>

#include "kernels/cpu/isa/matmul_int8.h"

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

}  // namespace
}  // namespace tachyon::kernels::cpu
