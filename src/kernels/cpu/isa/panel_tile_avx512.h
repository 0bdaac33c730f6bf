// The register tile the AVX-512 Panel64 matmuls share (dense and quantized weights): MR rows of
// x times one panel's 64 outputs, as MR x 4 accumulators, each lane one output's sequential fma
// chain over k (cpu/dot.h's order). Only for files compiled with AVX-512 flags; internal linkage,
// as in cpu/dot.h.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tachyon::kernels::cpu {
namespace {

template <int MR>
__attribute__((always_inline)) inline void zero_tile(__m512 (&acc)[MR][4]) {
#pragma GCC unroll 7
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_setzero_ps();
}

// One k step t: acc[i] += x[i][t] · w for every row i (x row-major with row stride k).
template <int MR>
__attribute__((always_inline)) inline void fma_step(const float* x, int64_t k, int64_t t, const __m512 (&w)[4], __m512 (&acc)[MR][4]) {
#pragma GCC unroll 7
  for (int i = 0; i < MR; ++i) {
    const __m512 xb = _mm512_set1_ps(x[i * k + t]);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_fmadd_ps(xb, w[j], acc[i][j]);
  }
}

// The tile's outputs, columns < valid only (the panel's zero padding is not stored).
template <int MR>
__attribute__((always_inline)) inline void store_tile(const __m512 (&acc)[MR][4], float* out, int64_t ldo, int valid) {
  for (int j = 0; j < 4; ++j) {
    const int c = 16 * j;
    if (c >= valid) break;
    const __mmask16 keep = valid - c >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (valid - c)) - 1);
    for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(out + i * ldo + c, keep, acc[i][j]);
  }
}

}  // namespace
}  // namespace tachyon::kernels::cpu
