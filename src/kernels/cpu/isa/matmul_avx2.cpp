// AVX2 + FMA + F16C matmul over Panel64 weights. Compiled with -mavx2 -mfma -mf16c; only
// called when the CPU has them (isa_kernels()). A register tile is MR rows of x by NV·8
// consecutive outputs of one panel; lane j of an accumulator is output n's sequential fma
// chain over k (cpu/dot.h), so any tile, thread split or batch size gives the same bits.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/isa/matmul.h"

namespace tachyon::kernels::cpu {

namespace {

constexpr int64_t kPanel = Weight::kPanel;

// The 32 outputs [g·32, g·32 + 32) of one k step of a panel as four f32 vectors in output
// order (bf16 panels are interleaved, kernels/weight.h: a shift and a mask convert them).
template <DType WT>
inline void load32(const void* base, int64_t index, __m256 v[4]) {
  if constexpr (WT == DType::F32) {
    const float* p = static_cast<const float*>(base) + index;
    for (int j = 0; j < 4; ++j) v[j] = _mm256_loadu_ps(p + 8 * j);
  } else if constexpr (WT == DType::BF16) {
    const uint16_t* p = static_cast<const uint16_t*>(base) + index;
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16));
    const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
    v[0] = _mm256_castsi256_ps(_mm256_slli_epi32(a, 16));
    v[1] = _mm256_castsi256_ps(_mm256_slli_epi32(b, 16));
    v[2] = _mm256_castsi256_ps(_mm256_and_si256(a, high));
    v[3] = _mm256_castsi256_ps(_mm256_and_si256(b, high));
  } else if constexpr (WT == DType::I8) {
    const int8_t* p = static_cast<const int8_t*>(base) + index;
    for (int j = 0; j < 4; ++j)
      v[j] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * j))));
  } else {
    const uint16_t* p = static_cast<const uint16_t*>(base) + index;
    for (int j = 0; j < 4; ++j) v[j] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8 * j)));
  }
}

// Outputs [g0·32, (g0 + NG)·32) of the panel starting at element `panel` (k-major, 64 wide),
// for MR rows of x. Writes only columns < valid (the panel's zero padding is not stored).
template <DType WT, int MR, int NG>
void tile(const float* x, int64_t k, const void* w, int64_t panel, int g0, float* out, int64_t ldo, int valid) {
  __m256 acc[MR][4 * NG];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < 4 * NG; ++j) acc[i][j] = _mm256_setzero_ps();
  int64_t base = panel + 32 * g0;
  for (int64_t t = 0; t < k; ++t, base += kPanel) {
#pragma GCC unroll 2
    for (int g = 0; g < NG; ++g) {
      __m256 wv[4];
      load32<WT>(w, base + 32 * g, wv);
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        const __m256 xb = _mm256_broadcast_ss(x + i * k + t);
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) acc[i][4 * g + j] = _mm256_fmadd_ps(xb, wv[j], acc[i][4 * g + j]);
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < 4 * NG; ++j) {
      const int c = 32 * g0 + 8 * j;
      if (c + 8 <= valid) {
        _mm256_storeu_ps(out + i * ldo + c, acc[i][j]);
      } else if (c < valid) {
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, acc[i][j]);
        for (int l = 0; c + l < valid; ++l) out[i * ldo + c + l] = lanes[l];
      }
    }
}

// Every row of x against one panel (`panel`: its first element in `w`).
template <DType WT>
void panel_rows(const float* x, int64_t rows, int64_t k, const void* w, int64_t panel, float* o, int64_t ldo,
                int valid) {
  int64_t m = 0;
  // Three rows share each converted weight vector (12 accumulators, 16 registers); a single
  // row takes the whole panel at once (8 independent chains hide the FMA latency).
  for (; m + 3 <= rows; m += 3) {
    tile<WT, 3, 1>(x + m * k, k, w, panel, 0, o + m * ldo, ldo, valid);
    if (valid > 32) tile<WT, 3, 1>(x + m * k, k, w, panel, 1, o + m * ldo, ldo, valid);
  }
  for (; m < rows; ++m) tile<WT, 1, 2>(x + m * k, k, w, panel, 0, o + m * ldo, ldo, valid);
}

template <DType WT>
void matmul_panels(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                   int64_t ldo) {
  const int64_t k = w.cols;
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kPanel) {
    const int valid = static_cast<int>(std::min<int64_t>(kPanel, n_end - n0));
    panel_rows<WT>(x, rows, k, w.data, (n0 / kPanel) * k * kPanel, out + n0, ldo, valid);
  }
}

}  // namespace

void matmul_range_avx2(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                       int64_t ldo) {
  if (w.quantized()) return matmul_quant_avx2(x, rows, w, n_begin, n_end, out, ldo);
  with_panel_dtype(w, [&](auto wt) { matmul_panels<decltype(wt)::value>(x, rows, w, n_begin, n_end, out, ldo); });
  scale_i8_outputs(w, rows, n_begin, n_end, out, ldo);
}

void matmul_f32_panel_avx2(const float* x, int64_t rows, int64_t k, const float* panel, float* out, int64_t ldo,
                           int valid) {
  panel_rows<DType::F32>(x, rows, k, panel, 0, out, ldo, valid);
}

float dot_f32_avx2(const float* a, const float* b, int64_t k) { return dot_canonical(a, b, k); }

}  // namespace tachyon::kernels::cpu
