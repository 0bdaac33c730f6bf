// AVX2 + FMA + F16C matmul over quantized Panel64 weights (cpu/isa/matmul_quant.h). Compiled
// like matmul_avx2.cpp. A register tile is MR rows by 32 outputs (one half of a panel: for
// 4-bit codes the low nibbles of the step's 32 bytes, or their high nibbles); codes are
// zero-extended 8 at a time (one extension serves both nibbles when a tile covers the whole
// panel), decoded to their f32 values by integer arithmetic (e2m1 by an 8-entry permute and
// the sign bit), scaled as the scalar definition, and fed to the dense tiles' fma chains.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/isa/matmul_quant.h"

namespace tachyon::kernels::cpu {

namespace {

constexpr int64_t kPanel = Weight::kPanel;

// 32 scales (or biases) of one (panel, group), outputs [32h, 32h + 32) starting at `index`.
template <DType S>
inline void load_scales(const void* base, int64_t index, __m256 v[4]) {
  for (int j = 0; j < 4; ++j) {
    if constexpr (S == DType::F32) {
      v[j] = _mm256_loadu_ps(static_cast<const float*>(base) + index + 8 * j);
    } else if constexpr (S == DType::F16) {
      v[j] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + index + 8 * j)));
    } else if constexpr (S == DType::BF16) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + index + 8 * j));
      v[j] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {  // e8m0: 2^(e − 127); e = 0 is the subnormal 2^-127, 255 is NaN
      const __m256i e =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(base) + index + 8 * j)));
      __m256i bits = _mm256_slli_epi32(e, 23);
      bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x00400000), _mm256_cmpeq_epi32(e, _mm256_setzero_si256()));
      bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x7fc00000), _mm256_cmpeq_epi32(e, _mm256_set1_epi32(255)));
      v[j] = _mm256_castsi256_ps(bits);
    }
  }
}

// e4m3fn bytes (one per lane) to f32, as tachyon::fp8_e4m3_to_f32 (see matmul_quant_avx512.cpp).
inline __m256 e4m3_to_f32(__m256i b) {
  const __m256i m7 = _mm256_and_si256(b, _mm256_set1_epi32(0x7f));
  const __m256 normal = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(m7, 20), _mm256_set1_epi32(120 << 23)));
  const __m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(b, _mm256_set1_epi32(7))), _mm256_set1_ps(1.f / 512.f));
  __m256 v = _mm256_blendv_ps(normal, sub, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(8), m7)));
  v = _mm256_or_ps(v, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x80)), 24)));
  return _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)),
                          _mm256_castsi256_ps(_mm256_cmpeq_epi32(m7, _mm256_set1_epi32(0x7f))));
}

// The value of 8 eight-bit codes (one per lane).
template <Codes C>
inline __m256 decode8(__m256i code) {
  if constexpr (C == Codes::E4M3) return e4m3_to_f32(code);
  else return _mm256_cvtepi32_ps(code);
}

// The value of the low (H = 0) or high (H = 1) nibbles of 8 zero-extended bytes: U4 masked or
// shifted down, S4 sign-extended by a shift pair, e2m1 by an 8-entry permute of its magnitude
// (vpermps reads the low 3 bits) and its sign bit moved to bit 31.
template <Codes C, int H>
inline __m256 nibble_values(__m256i bytes) {
  if constexpr (C == Codes::U4) {
    return _mm256_cvtepi32_ps(H == 0 ? _mm256_and_si256(bytes, _mm256_set1_epi32(15)) : _mm256_srli_epi32(bytes, 4));
  } else if constexpr (C == Codes::S4) {
    return _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(bytes, H == 0 ? 28 : 24), 28));
  } else {
    const __m256 magnitudes = _mm256_setr_ps(0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f);
    const __m256 magnitude = _mm256_permutevar8x32_ps(magnitudes, H == 0 ? bytes : _mm256_srli_epi32(bytes, 4));
    const __m256i sign = _mm256_and_si256(_mm256_slli_epi32(bytes, H == 0 ? 28 : 24), _mm256_set1_epi32(static_cast<int>(0x80000000u)));
    return _mm256_or_ps(magnitude, _mm256_castsi256_ps(sign));
  }
}

template <Codes C>
inline __m256 scaled(__m256 v, __m256 s, __m256 b) {
  return has_bias(C) ? _mm256_fmadd_ps(v, s, b) : _mm256_mul_ps(v, s);
}

// The f32 weights of outputs [32·(H0 + h), 32·(H0 + h) + 32) for h < NH of one k step (`p`: the
// step's first byte); 4-bit halves share one zero-extension of the step's bytes.
template <Codes C, int H0, int NH>
inline void weights(const uint8_t* p, const __m256 s[][4], const __m256 b[][4], __m256 w[][4]) {
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    if constexpr (four_bit(C)) {
      const __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * j)));
      w[0][j] = scaled<C>(nibble_values<C, H0>(bytes), s[0][j], b[0][j]);
      if constexpr (NH == 2) w[1][j] = scaled<C>(nibble_values<C, 1>(bytes), s[1][j], b[1][j]);
    } else {
#pragma GCC unroll 2
      for (int h = 0; h < NH; ++h) {
        const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 32 * (H0 + h) + 8 * j));
        const __m256i code = C == Codes::S8 ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
        w[h][j] = scaled<C>(decode8<C>(code), s[h][j], b[h][j]);
      }
    }
  }
}

void store_outputs(const __m256 acc, float* out, int c, int valid) {
  if (c + 8 <= valid) {
    _mm256_storeu_ps(out + c, acc);
  } else if (c < valid) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc);
    for (int l = 0; c + l < valid; ++l) out[c + l] = lanes[l];
  }
}

// Outputs [32·H0, 32·(H0 + NH)) of the panel for MR rows of x.
template <Codes C, DType S, int MR, int H0, int NH>
void tile(const float* x, const PanelRef& pr, float* out, int64_t ldo, int valid) {
  __m256 acc[MR][4 * NH];
#pragma GCC unroll 3
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < 4 * NH; ++j) acc[i][j] = _mm256_setzero_ps();
  const int64_t k = pr.k;
  int64_t scale_at = pr.scale_index;
  for (int64_t t0 = 0; t0 < k; t0 += pr.group, scale_at += kPanel) {
    __m256 s[NH][4], b[NH][4];
    for (int h = 0; h < NH; ++h) {
      load_scales<S>(pr.scales, scale_at + 32 * (H0 + h), s[h]);
      if constexpr (has_bias(C)) load_scales<S>(pr.biases, scale_at + 32 * (H0 + h), b[h]);
    }
    const int64_t t1 = std::min(k, t0 + pr.group);
    const uint8_t* p = pr.codes + t0 * pr.step_bytes;
    for (int64_t t = t0; t < t1; ++t, p += pr.step_bytes) {
      __m256 wv[NH][4];
      weights<C, H0, NH>(p, s, b, wv);
#pragma GCC unroll 3
      for (int i = 0; i < MR; ++i) {
        const __m256 xb = _mm256_broadcast_ss(x + i * k + t);
#pragma GCC unroll 8
        for (int j = 0; j < 4 * NH; ++j) acc[i][j] = _mm256_fmadd_ps(xb, wv[j / 4][j % 4], acc[i][j]);
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < 4 * NH; ++j) store_outputs(acc[i][j], out + i * ldo, 32 * H0 + 8 * j, valid);
}

// The panel's f32 weights, k-major ([k][64], output order), for the dense f32 tiles.
template <Codes C, DType S>
void dequantize_panel(const PanelRef& pr, float* dst) {
  int64_t scale_at = pr.scale_index;
  for (int64_t t0 = 0; t0 < pr.k; t0 += pr.group, scale_at += kPanel) {
    __m256 s[2][4], b[2][4];
    for (int h = 0; h < 2; ++h) {
      load_scales<S>(pr.scales, scale_at + 32 * h, s[h]);
      if constexpr (has_bias(C)) load_scales<S>(pr.biases, scale_at + 32 * h, b[h]);
    }
    const int64_t t1 = std::min(pr.k, t0 + pr.group);
    for (int64_t t = t0; t < t1; ++t) {
      __m256 wv[2][4];
      weights<C, 0, 2>(pr.codes + t * pr.step_bytes, s, b, wv);
      for (int h = 0; h < 2; ++h)
        for (int j = 0; j < 4; ++j) _mm256_storeu_ps(dst + t * kPanel + 32 * h + 8 * j, wv[h][j]);
    }
  }
}

template <Codes C, DType S>
void matmul_panels(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                   int64_t ldo) {
  const int64_t k = w.cols;
  thread_local std::vector<float> panel;
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kPanel) {
    const PanelRef pr = panel_ref(w, n0);
    const int valid = static_cast<int>(std::min<int64_t>(kPanel, n_end - n0));
    float* o = out + n0;
    if (rows > kQuantRegisterRowsAvx2) {
      panel.resize(static_cast<size_t>(k * kPanel));
      dequantize_panel<C, S>(pr, panel.data());
      matmul_f32_panel_avx2(x, rows, k, panel.data(), o, ldo, valid);
      continue;
    }
    // As the dense tiles: three rows per half panel, a single row takes the whole panel.
    int64_t m = 0;
    for (; m + 3 <= rows; m += 3) {
      tile<C, S, 3, 0, 1>(x + m * k, pr, o + m * ldo, ldo, valid);
      if (valid > 32) tile<C, S, 3, 1, 1>(x + m * k, pr, o + m * ldo, ldo, valid);
    }
    for (; m < rows; ++m) tile<C, S, 1, 0, 2>(x + m * k, pr, o + m * ldo, ldo, valid);
  }
}

}  // namespace

void matmul_quant_avx2(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                       int64_t ldo) {
  if (w.layout != WeightLayout::Panel64) std::abort();  // the CPU backend packs every quantized matrix
  if (rows <= 0) return;
  with_quant_kind(w, [&](auto codes, auto scales) {
    matmul_panels<decltype(codes)::value, decltype(scales)::value>(x, rows, w, n_begin, n_end, out, ldo);
  });
}

}  // namespace tachyon::kernels::cpu
