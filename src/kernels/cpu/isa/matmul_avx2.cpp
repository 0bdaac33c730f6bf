// AVX2 + FMA + F16C matmul. Compiled with -mavx2 -mfma -mf16c; only called when the CPU
// has them (isa_kernels()). Register tiles of MR rows of x by NR rows of w; every (m, n)
// dot reduces in the canonical order of cpu/dot.h, so tiles, thread splits and batch
// sizes never change a result bit.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/isa/matmul.h"

namespace tachyon::kernels::cpu {

namespace {

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

template <DType WT>
inline float load1(const void* base, int64_t index) {
  if constexpr (WT == DType::F32) return static_cast<const float*>(base)[index];
  else if constexpr (WT == DType::BF16) return tachyon::bf16_to_f32(static_cast<const uint16_t*>(base)[index]);
  else return _cvtsh_ss(static_cast<const uint16_t*>(base)[index]);
}

inline float finish(__m256 acc) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  return hsum8(lanes);
}

// out[i, j] for i < MR, j < NR: rows x[0..MR) and weight rows n0..n0+NR.
template <DType WT, int MR, int NR>
void tile(const float* x, const void* w, int64_t n0, int64_t k, float* out, int64_t ldo) {
  __m256 acc[MR][NR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  const int64_t k8 = k - k % 8;
  for (int64_t t = 0; t < k8; t += 8) {
    __m256 wv[NR];
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) wv[j] = load8<WT>(w, (n0 + j) * k + t);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const __m256 xv = _mm256_loadu_ps(x + i * k + t);
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) {
      float r = finish(acc[i][j]);
      for (int64_t t = k8; t < k; ++t) r = std::fma(x[i * k + t], load1<WT>(w, (n0 + j) * k + t), r);
      out[i * ldo + n0 + j] = r;
    }
}

using TileFn = void (*)(const float*, const void*, int64_t, int64_t, float*, int64_t);

template <DType WT, int MR, int... NRs>
constexpr std::array<TileFn, sizeof...(NRs)> row_of_tiles(std::integer_sequence<int, NRs...>) {
  return {&tile<WT, MR, NRs + 1>...};
}

template <DType WT>
TileFn tile_for(int mr, int nr) {
  static constexpr auto seq = std::make_integer_sequence<int, 8>{};
  static constexpr std::array<std::array<TileFn, 8>, 4> table{row_of_tiles<WT, 1>(seq), row_of_tiles<WT, 2>(seq),
                                                              row_of_tiles<WT, 3>(seq), row_of_tiles<WT, 4>(seq)};
  return table[mr - 1][nr - 1];
}

constexpr int nr_for(int mr) { return mr == 1 ? 8 : (mr == 4 ? 3 : 4); }

template <DType WT>
void matmul_range(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                  int64_t ldo) {
  const int64_t k = w.cols;
  // Rows of x processed per pass over this thread's weight rows: a block that stays in L2.
  const int64_t chunk = std::clamp<int64_t>((int64_t{1} << 17) / std::max<int64_t>(k, 1) / 4 * 4, 4, 256);
  for (int64_t m0 = 0; m0 < rows; m0 += chunk) {
    const int64_t m1 = std::min(rows, m0 + chunk);
    const int mr_full = static_cast<int>(std::min<int64_t>(4, m1 - m0));
    const int nr = nr_for(mr_full);
    for (int64_t n = n_begin; n < n_end; n += nr) {
      const int nr_here = static_cast<int>(std::min<int64_t>(nr, n_end - n));
      for (int64_t m = m0; m < m1; m += 4) {
        const int mr = static_cast<int>(std::min<int64_t>(4, m1 - m));
        tile_for<WT>(mr, nr_here)(x + m * k, w.data, n, k, out + m * ldo, ldo);
      }
    }
  }
}

}  // namespace

void matmul_range_avx2(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                       int64_t ldo) {
  switch (w.dtype) {
    case DType::F32: return matmul_range<DType::F32>(x, rows, w, n_begin, n_end, out, ldo);
    case DType::BF16: return matmul_range<DType::BF16>(x, rows, w, n_begin, n_end, out, ldo);
    case DType::F16: return matmul_range<DType::F16>(x, rows, w, n_begin, n_end, out, ldo);
    default: std::abort();
  }
}

float dot_f32_avx2(const float* a, const float* b, int64_t k) {
  __m256 acc = _mm256_setzero_ps();
  const int64_t k8 = k - k % 8;
  for (int64_t t = 0; t < k8; t += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + t), _mm256_loadu_ps(b + t), acc);
  float r = finish(acc);
  for (int64_t t = k8; t < k; ++t) r = std::fma(a[t], b[t], r);
  return r;
}

}  // namespace tachyon::kernels::cpu
