// AVX-512 matmul over Panel64 weights. Compiled with -mavx512f -mavx512bw -mavx512vl -mf16c -mfma;
// only called when the CPU has AVX-512F/BW (isa_kernels()). 32 vector registers hold a whole
// panel row (64 outputs = 4 vectors) for up to 6 rows of x at once (7 for a 7-row matmul), so a
// verify step of up to 6 drafts, or any prefill, reads each weight once per 6 rows: decode is bandwidth-bound and
// speculation's extra rows ride on the same weight stream. Lane j of an accumulator is output
// n's sequential fma chain over k (cpu/dot.h): any tile, thread split or batch size gives the
// same bits as every other ISA path.
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>

#include "kernels/cpu/isa/matmul.h"
#include "kernels/cpu/isa/panel_tile_avx512.h"

namespace tachyon::kernels::cpu {

namespace {

constexpr int64_t kPanel = Weight::kPanel;
constexpr int kMaxRows = 6;  // 6 rows × 4 accumulators + 4 weight vectors + broadcast + mask ≤ 32 registers
// A forward streams the model's weights from L3 (they do not fit L2), and the L2 streamer stops
// at each 4 KiB page: without a software prefetch one page ahead a verify step's multi-row tiles
// waited for memory and then computed, instead of overlapping the two (bench/results/
// verify-cost-cpu-*.md: all matmuls of a forward, 5 rows, 1426 → 1104 µs; 1 row 1116 → 1017).
constexpr int64_t kPrefetchBytes = 4096;

// One k step of a panel (64 outputs) as four f32 vectors in output order. bf16 panels are
// interleaved per 32 outputs (kernels/weight.h): a shift and a mask convert 32 weights.
template <DType WT>
inline void load64(const void* base, int64_t index, __m512 v[4]) {
  if constexpr (WT == DType::F32) {
    const float* p = static_cast<const float*>(base) + index;
    for (int j = 0; j < 4; ++j) v[j] = _mm512_loadu_ps(p + 16 * j);
  } else if constexpr (WT == DType::BF16) {
    const uint16_t* p = static_cast<const uint16_t*>(base) + index;
    const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    for (int g = 0; g < 2; ++g) {
      const __m512i pairs = _mm512_loadu_si512(p + 32 * g);
      v[2 * g] = _mm512_castsi512_ps(_mm512_slli_epi32(pairs, 16));
      v[2 * g + 1] = _mm512_castsi512_ps(_mm512_and_si512(pairs, high));
    }
  } else if constexpr (WT == DType::I8) {
    const int8_t* p = static_cast<const int8_t*>(base) + index;
    for (int j = 0; j < 4; ++j)
      v[j] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * j))));
  } else {
    const uint16_t* p = static_cast<const uint16_t*>(base) + index;
    for (int j = 0; j < 4; ++j)
      v[j] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * j)));
  }
}

// All 64 outputs of the panel starting at element `panel`, for MR rows of x. Writes only
// columns < valid (the panel's zero padding is not stored).
template <DType WT, int MR>
void tile(const float* x, int64_t k, const void* w, int64_t panel, float* out, int64_t ldo, int valid) {
  __m512 acc[MR][4];
  zero_tile(acc);
  constexpr int64_t esize = WT == DType::F32 ? 4 : WT == DType::I8 ? 1 : 2;
  const char* ahead = static_cast<const char*>(w) + panel * esize + kPrefetchBytes;
  int64_t base = panel;
  for (int64_t t = 0; t < k; ++t, base += kPanel, ahead += kPanel * esize) {
#pragma GCC unroll 4
    for (int64_t line = 0; line < kPanel * esize; line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
    __m512 wv[4];
    load64<WT>(w, base, wv);
    fma_step(x, k, t, wv, acc);
  }
  store_tile(acc, out, ldo, valid);
}

template <DType WT>
void matmul_panels(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                   int64_t ldo) {
  using TileFn = void (*)(const float*, int64_t, const void*, int64_t, float*, int64_t, int);
  static constexpr TileFn tiles[kMaxRows + 1] = {nullptr,         tile<WT, 1>, tile<WT, 2>, tile<WT, 3>,
                                                 tile<WT, 4>, tile<WT, 5>, tile<WT, 6>};
  const int64_t k = w.cols;
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kPanel) {
    const int64_t panel = (n0 / kPanel) * k * kPanel;
    const int valid = static_cast<int>(std::min<int64_t>(kPanel, n_end - n0));
    // 7 rows (a verify step of 6 drafts, a 7-node draft tree, a DFlash block's logits): one tile
    // of 28 accumulators (the compiler takes the rows' broadcasts from memory). 6 rows and a
    // second pass for the 7th converted every weight again: that row cost four rows inside a tile.
    // (Half-panel tiles for 8 to 12 rows measured slower than 6 + the rest: a forward streams its
    // weights from memory, and two passes over every other cache line defeat the prefetchers.)
    if (rows == kMaxRows + 1) {
      tile<WT, kMaxRows + 1>(x, k, w.data, panel, out + n0, ldo, valid);
      continue;
    }
    for (int64_t m = 0; m < rows; m += kMaxRows) {
      const int mr = static_cast<int>(std::min<int64_t>(kMaxRows, rows - m));
      tiles[mr](x + m * k, k, w.data, panel, out + m * ldo + n0, ldo, valid);
    }
  }
}

}  // namespace

void matmul_range_avx512(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                         int64_t ldo) {
  if (w.quantized()) return matmul_quant_avx512(x, rows, w, n_begin, n_end, out, ldo);
  with_panel_dtype(w, [&](auto wt) { matmul_panels<decltype(wt)::value>(x, rows, w, n_begin, n_end, out, ldo); });
  scale_i8_outputs(w, rows, n_begin, n_end, out, ldo);
}

void matmul_f32_panel_avx512(const float* x, int64_t rows, int64_t k, const float* panel, float* out, int64_t ldo,
                             int valid) {
  using TileFn = void (*)(const float*, int64_t, const void*, int64_t, float*, int64_t, int);
  static constexpr TileFn tiles[kMaxRows + 1] = {nullptr,         tile<DType::F32, 1>, tile<DType::F32, 2>,
                                                 tile<DType::F32, 3>, tile<DType::F32, 4>, tile<DType::F32, 5>,
                                                 tile<DType::F32, 6>};
  for (int64_t m = 0; m < rows; m += kMaxRows) {
    const int mr = static_cast<int>(std::min<int64_t>(kMaxRows, rows - m));
    tiles[mr](x + m * k, k, panel, 0, out + m * ldo, ldo, valid);
  }
}

}  // namespace tachyon::kernels::cpu
