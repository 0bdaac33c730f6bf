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

template <DType WT>
inline __m256 load8(const void* base, int64_t index) {
  if constexpr (WT == DType::F32) {
    return _mm256_loadu_ps(static_cast<const float*>(base) + index);
  } else if constexpr (WT == DType::BF16) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + index));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + index));
    return _mm256_cvtph_ps(h);
  }
}

// Outputs [col0, col0 + 8·NV) of the panel starting at element `panel` (k-major, 64 wide),
// for MR rows of x. Writes only columns < valid (the panel's zero padding is not stored).
template <DType WT, int MR, int NV>
void tile(const float* x, int64_t k, const void* w, int64_t panel, int col0, float* out, int64_t ldo, int valid) {
  __m256 acc[MR][NV];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) acc[i][j] = _mm256_setzero_ps();
  int64_t base = panel + col0;
  for (int64_t t = 0; t < k; ++t, base += kPanel) {
    __m256 wv[NV];
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) wv[j] = load8<WT>(w, base + 8 * j);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const __m256 xb = _mm256_broadcast_ss(x + i * k + t);
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm256_fmadd_ps(xb, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) {
      const int c = col0 + 8 * j;
      if (c + 8 <= valid) {
        _mm256_storeu_ps(out + i * ldo + c, acc[i][j]);
      } else if (c < valid) {
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, acc[i][j]);
        for (int l = 0; c + l < valid; ++l) out[i * ldo + c + l] = lanes[l];
      }
    }
}

template <DType WT>
void matmul_panels(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                   int64_t ldo) {
  const int64_t k = w.cols;
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kPanel) {
    const int64_t panel = (n0 / kPanel) * k * kPanel;
    float* o = out + n0;
    const int valid = static_cast<int>(std::min<int64_t>(kPanel, n_end - n0));
    int64_t m = 0;
    // Three rows share each converted weight vector (12 accumulators); leftovers take the
    // whole panel at once (8 accumulators: enough independent chains to hide FMA latency).
    for (; m + 3 <= rows; m += 3) {
      tile<WT, 3, 4>(x + m * k, k, w.data, panel, 0, o + m * ldo, ldo, valid);
      if (valid > 32) tile<WT, 3, 4>(x + m * k, k, w.data, panel, 32, o + m * ldo, ldo, valid);
    }
    for (; m < rows; ++m) tile<WT, 1, 8>(x + m * k, k, w.data, panel, 0, o + m * ldo, ldo, valid);
  }
}

}  // namespace

void matmul_range_avx2(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                       int64_t ldo) {
  if (w.layout != WeightLayout::Panel64) std::abort();  // the CPU backend packs every matrix
  switch (w.dtype) {
    case DType::F32: return matmul_panels<DType::F32>(x, rows, w, n_begin, n_end, out, ldo);
    case DType::BF16: return matmul_panels<DType::BF16>(x, rows, w, n_begin, n_end, out, ldo);
    case DType::F16: return matmul_panels<DType::F16>(x, rows, w, n_begin, n_end, out, ldo);
    default: std::abort();
  }
}

float dot_f32_avx2(const float* a, const float* b, int64_t k) {
  __m256 acc = _mm256_setzero_ps();
  const int64_t k8 = k - k % 8;
  for (int64_t t = 0; t < k8; t += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + t), _mm256_loadu_ps(b + t), acc);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  float r = hsum8(lanes);
  for (int64_t t = k8; t < k; ++t) r = std::fma(a[t], b[t], r);
  return r;
}

}  // namespace tachyon::kernels::cpu
