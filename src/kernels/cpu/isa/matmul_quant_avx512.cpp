// AVX-512 matmul over quantized Panel64 weights (cpu/isa/matmul_quant.h). Compiled like
// matmul_avx512.cpp; only called when the CPU has AVX-512F/BW. One k step of a panel is 32
// (4-bit) or 64 (8-bit) bytes: zero-extended to 32-bit lanes, decoded to the codes' f32 values
// (a 16-entry permute for 4-bit codes, a convert for 8-bit integers, f16 bits for e4m3), then
// times the group's scale (plus bias), exactly as the scalar definition, and into the same
// fma chains as the dense tiles. Scales are loaded once per group as stored (F16 by vcvtph2ps,
// BF16 by a shift, e8m0 by an exponent shift), so decode streams only the packed bytes.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/isa/matmul_quant.h"
#include "kernels/cpu/isa/panel_tile_avx512.h"

namespace tachyon::kernels::cpu {

namespace {

constexpr int64_t kPanel = Weight::kPanel;
constexpr int64_t kPrefetchBytes = 4096;  // one page ahead, as the dense tiles (matmul_avx512.cpp)

// 64 scales (or biases) of one (panel, group), in output order.
template <DType S>
inline void load_scales(const void* base, int64_t index, __m512 v[4]) {
  if constexpr (S == DType::F32) {
    const float* p = static_cast<const float*>(base) + index;
    for (int j = 0; j < 4; ++j) v[j] = _mm512_loadu_ps(p + 16 * j);
  } else if constexpr (S == DType::F16) {
    const uint16_t* p = static_cast<const uint16_t*>(base) + index;
    for (int j = 0; j < 4; ++j) v[j] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * j)));
  } else if constexpr (S == DType::BF16) {
    const uint16_t* p = static_cast<const uint16_t*>(base) + index;
    for (int j = 0; j < 4; ++j)
      v[j] = _mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * j))), 16));
  } else {  // e8m0: 2^(e − 127); e = 0 is the subnormal 2^-127, 255 is NaN
    const uint8_t* p = static_cast<const uint8_t*>(base) + index;
    for (int j = 0; j < 4; ++j) {
      const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * j)));
      __m512i bits = _mm512_slli_epi32(e, 23);
      bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512()), _mm512_set1_epi32(0x00400000));
      bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(255)), _mm512_set1_epi32(0x7fc00000));
      v[j] = _mm512_castsi512_ps(bits);
    }
  }
}

template <Codes C>
inline __m512 four_bit_table() {
  return _mm512_setr_ps(four_bit_value<C>(0), four_bit_value<C>(1), four_bit_value<C>(2), four_bit_value<C>(3),
                        four_bit_value<C>(4), four_bit_value<C>(5), four_bit_value<C>(6), four_bit_value<C>(7),
                        four_bit_value<C>(8), four_bit_value<C>(9), four_bit_value<C>(10), four_bit_value<C>(11),
                        four_bit_value<C>(12), four_bit_value<C>(13), four_bit_value<C>(14), four_bit_value<C>(15));
}

// 32 e4m3fn bytes to f32 (two vectors of 16), as tachyon::fp8_e4m3_to_f32: an e4m3fn byte's
// bits moved up by 7 (sign by 8) are the f16 of its value / 256 (same mantissa width apart,
// subnormals included: f16 has 5 exponent bits), so vcvtph2ps and an exact × 256 decode it;
// 0x7f / 0xff become the f16 NaN first.
inline void e4m3_to_f32(__m256i bytes, __m512 v[2]) {
  const __m512i x = _mm512_cvtepu8_epi16(bytes);
  const __m512i magnitude = _mm512_and_si512(x, _mm512_set1_epi16(0x7f));
  __m512i half = _mm512_ternarylogic_epi32(_mm512_slli_epi16(magnitude, 7), _mm512_slli_epi16(x, 8),
                                           _mm512_set1_epi16(static_cast<short>(0x8000)), 0xF8);  // a | (b & c)
  half = _mm512_mask_mov_epi16(half, _mm512_cmpeq_epi16_mask(magnitude, _mm512_set1_epi16(0x7f)), _mm512_set1_epi16(0x7e00));
  const __m512 scale = _mm512_set1_ps(256.f);
  v[0] = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(half)), scale);
  v[1] = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(half, 1)), scale);
}

// The codes' values (before scales) of one k step: outputs [16j, 16j + 16) in v[j].
template <Codes C>
inline void decode64(const uint8_t* p, __m512 table, __m512 v[4]) {
  if constexpr (four_bit(C)) {
    const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m512i hi = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)));
    // vpermps reads the low 4 bits of each index: the low nibble needs no mask.
    v[0] = _mm512_permutexvar_ps(lo, table);
    v[1] = _mm512_permutexvar_ps(hi, table);
    v[2] = _mm512_permutexvar_ps(_mm512_srli_epi32(lo, 4), table);
    v[3] = _mm512_permutexvar_ps(_mm512_srli_epi32(hi, 4), table);
  } else if constexpr (C == Codes::E4M3) {
    e4m3_to_f32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), v);
    e4m3_to_f32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)), v + 2);
  } else {
    for (int j = 0; j < 4; ++j) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * j));
      if constexpr (C == Codes::S8) v[j] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes));
      else v[j] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes));
    }
  }
}

template <Codes C>
inline __m512 decode_table() {
  if constexpr (four_bit(C)) return four_bit_table<C>();
  else return _mm512_setzero_ps();
}

// The f32 weights of one k step: value · scale (Affine: fma(value, scale, bias)).
template <Codes C>
inline void weights64(const uint8_t* p, __m512 table, const __m512 s[4], const __m512 b[4], __m512 w[4]) {
  decode64<C>(p, table, w);
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) w[j] = has_bias(C) ? _mm512_fmadd_ps(w[j], s[j], b[j]) : _mm512_mul_ps(w[j], s[j]);
}

// MR rows of x against the panel, weights dequantized in registers.
template <Codes C, DType S, int MR>
void tile(const float* x, const PanelRef& pr, float* out, int64_t ldo, int valid) {
  __m512 acc[MR][4];
  zero_tile(acc);
  const __m512 table = decode_table<C>();
  const int64_t k = pr.k;
  int64_t scale_at = pr.scale_index;
  for (int64_t t0 = 0; t0 < k; t0 += pr.group, scale_at += kPanel) {
    __m512 s[4], b[4];
    load_scales<S>(pr.scales, scale_at, s);
    if constexpr (has_bias(C)) load_scales<S>(pr.biases, scale_at, b);
    const int64_t t1 = std::min(k, t0 + pr.group);
    const uint8_t* p = pr.codes + t0 * pr.step_bytes;
    for (int64_t t = t0; t < t1; ++t, p += pr.step_bytes) {
      _mm_prefetch(reinterpret_cast<const char*>(p) + kPrefetchBytes, _MM_HINT_T0);
      __m512 wv[4];
      weights64<C>(p, table, s, b, wv);
      fma_step(x, k, t, wv, acc);
    }
  }
  store_tile(acc, out, ldo, valid);
}

// The panel's f32 weights, k-major ([k][64], output order), for the dense f32 tiles.
template <Codes C, DType S>
void dequantize_panel(const PanelRef& pr, float* dst) {
  const __m512 table = decode_table<C>();
  int64_t scale_at = pr.scale_index;
  for (int64_t t0 = 0; t0 < pr.k; t0 += pr.group, scale_at += kPanel) {
    __m512 s[4], b[4];
    load_scales<S>(pr.scales, scale_at, s);
    if constexpr (has_bias(C)) load_scales<S>(pr.biases, scale_at, b);
    const int64_t t1 = std::min(pr.k, t0 + pr.group);
    for (int64_t t = t0; t < t1; ++t) {
      __m512 wv[4];
      weights64<C>(pr.codes + t * pr.step_bytes, table, s, b, wv);
      for (int j = 0; j < 4; ++j) _mm512_storeu_ps(dst + t * kPanel + 16 * j, wv[j]);
    }
  }
}

template <Codes C, DType S>
void matmul_panels(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                   int64_t ldo) {
  using TileFn = void (*)(const float*, const PanelRef&, float*, int64_t, int);
  static constexpr TileFn tiles[kMaxQuantTileRows + 1] = {nullptr,          tile<C, S, 1>, tile<C, S, 2>,
                                                          tile<C, S, 3>, tile<C, S, 4>, tile<C, S, 5>,
                                                          tile<C, S, 6>};
  thread_local std::vector<float> panel;
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kPanel) {
    const PanelRef pr = panel_ref(w, n0);
    const int valid = static_cast<int>(std::min<int64_t>(kPanel, n_end - n0));
    if (rows <= kQuantRegisterRowsAvx512) {
      for (int64_t m = 0; m < rows; m += kMaxQuantTileRows) {
        const int mr = static_cast<int>(std::min<int64_t>(kMaxQuantTileRows, rows - m));
        tiles[mr](x + m * w.cols, pr, out + m * ldo + n0, ldo, valid);
      }
      continue;
    }
    panel.resize(static_cast<size_t>(w.cols * kPanel));
    dequantize_panel<C, S>(pr, panel.data());
    matmul_f32_panel_avx512(x, rows, w.cols, panel.data(), out + n0, ldo, valid);
  }
}

}  // namespace

void matmul_quant_avx512(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                         int64_t ldo) {
  if (w.layout != WeightLayout::Panel64) std::abort();  // the CPU backend packs every quantized matrix
  if (rows <= 0) return;
  with_quant_kind(w, [&](auto codes, auto scales) {
    matmul_panels<decltype(codes)::value, decltype(scales)::value>(x, rows, w, n_begin, n_end, out, ldo);
  });
}

}  // namespace tachyon::kernels::cpu
