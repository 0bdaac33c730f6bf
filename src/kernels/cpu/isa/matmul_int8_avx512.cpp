// AVX-512 VNNI int8-activation matmul (cpu/isa/matmul_int8.h): vpdpbusd multiplies the stored
// unsigned codes (u = q + z0) by the signed activations, 4 k per 32-bit lane, 16 outputs per
// register; each block's exact int32 sum, less z0·Σq, then takes the canonical float step.
// Tiles of up to 3 rows share each weight load (integer and float accumulators: 24 registers).
// Reads every Panel64Dot form, compact ones included (6-bit codes: each byte's nibble joined by
// its two top bits in one ternary-logic op; factored scales: int8 times an f32 factor).
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/isa/matmul_int8_avx512.h"

namespace tachyon::kernels::cpu {

namespace {

constexpr int kMaxRows = 3;
constexpr int64_t kPrefetchBytes = 4096;

inline __m512i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// The exact int32 sums of 16 columns (k0, a multiple of 16) of up to MR rows against a panel's
// 64 outputs, added to isum. `p` is the panel's step at k0 (weight.h Panel64Dot).
template <int Bits, int MR>
inline void step16(const uint8_t* p, const int8_t* q, int64_t k, int64_t k0, __m512i isum[][4]) {
  _mm_prefetch(reinterpret_cast<const char*>(p) + kPrefetchBytes, _MM_HINT_T0);
  const __m512i low_nibbles = _mm512_set1_epi8(0x0f);
  // Column quad o of the step (4 consecutive k): codes u[j] for outputs [16j, 16j + 16).
  const auto accumulate = [&](int o, const __m512i u[4]) {
    for (int i = 0; i < MR; ++i) {
      const __m512i x = broadcast4(q + i * k + k0 + 4 * o);
      for (int j = 0; j < 4; ++j) isum[i][j] = _mm512_dpbusd_epi32(isum[i][j], u[j], x);
    }
  };
  if constexpr (Bits == 8) {
    for (int o = 0; o < 4; ++o) {
      __m512i u[4];
      for (int j = 0; j < 4; ++j) u[j] = _mm512_loadu_si512(p + o * 256 + 64 * j);
      accumulate(o, u);
    }
  } else if constexpr (Bits == 4) {
    for (int o = 0; o < 2; ++o) {
      __m512i lo[4], hi[4];
      for (int j = 0; j < 4; ++j) {
        const __m512i raw = _mm512_loadu_si512(p + o * 256 + 64 * j);
        lo[j] = _mm512_and_si512(raw, low_nibbles);
        hi[j] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low_nibbles);
      }
      accumulate(2 * o, lo);
      accumulate(2 * o + 1, hi);
    }
  } else {  // 6-bit: a nibble of the two octets, then the quad's two top bits moved to bits 4-5
    const __m512i top_bits = _mm512_set1_epi8(0x30);
    __m512i top[4];
    for (int j = 0; j < 4; ++j) top[j] = _mm512_loadu_si512(p + 512 + 64 * j);
    for (int o = 0; o < 2; ++o) {
      __m512i lo[4], hi[4];
      for (int j = 0; j < 4; ++j) {
        const __m512i raw = _mm512_loadu_si512(p + o * 256 + 64 * j);
        // Quad 2o's top bits sit at bits 4o..4o+1 of each byte, quad 2o + 1's at 4o + 2.
        const __m512i lo_top = o == 0 ? _mm512_slli_epi16(top[j], 4) : top[j];
        const __m512i hi_top = o == 0 ? _mm512_slli_epi16(top[j], 2) : _mm512_srli_epi16(top[j], 2);
        lo[j] = _mm512_ternarylogic_epi32(_mm512_and_si512(raw, low_nibbles), lo_top, top_bits, 0xF8);  // a | (b & c)
        hi[j] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(raw, 4), low_nibbles), hi_top, top_bits,
                                          0xF8);
      }
      accumulate(2 * o, lo);
      accumulate(2 * o + 1, hi);
    }
  }
}

template <int Bits, bool Affine, DType S, int MR>
void tile(const Int8Rows& a, const Weight& w, int64_t n0, float* out, int64_t ldo, int valid) {
  const int64_t k = w.cols, bw = a.block, blocks = k / bw, group_blocks = w.quant.group / bw, panel = n0 / kPanel64;
  const uint8_t* codes = static_cast<const uint8_t*>(w.data) + panel * k * kPanel64 * Bits / 8;
  const int64_t scale_base = panel * (k / w.quant.group) * kPanel64;
  const PanelValues<S> scales(w, w.quant.scales, panel), biases(w, Affine ? w.quant.biases : w.quant.scales, panel);
  constexpr int32_t z0 = Affine ? 0 : (Bits == 8 ? 128 : Bits == 6 ? 32 : 8);
  __m512 acc[MR][4];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    __m512i isum[MR][4];
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < 4; ++j) isum[i][j] = _mm512_setzero_si512();
    // The block's 16-column steps, into the same exact int32 sums.
    for (int64_t k0 = b * bw; k0 < (b + 1) * bw; k0 += kInt8MinBlock)
      step16<Bits, MR>(codes + k0 * kPanel64 * Bits / 8, a.q, k, k0, isum);
    const int64_t scale_at = scale_base + (b / group_blocks) * kPanel64;
    __m512 s[4];
    for (int j = 0; j < 4; ++j) s[j] = scales.load16(scale_at + 16 * j, b * bw, j);
    for (int i = 0; i < MR; ++i) {
      const __m512 d = _mm512_set1_ps(a.scale[i * blocks + b]);
      const __m512i correction = _mm512_set1_epi32(z0 * a.sum[i * blocks + b]);
      for (int j = 0; j < 4; ++j) {
        const __m512i exact = z0 ? _mm512_sub_epi32(isum[i][j], correction) : isum[i][j];
        acc[i][j] = _mm512_fmadd_ps(_mm512_mul_ps(s[j], d), _mm512_cvtepi32_ps(exact), acc[i][j]);
      }
    }
    if constexpr (Affine) {
      __m512 bias[4];
      for (int j = 0; j < 4; ++j) bias[j] = biases.load16(scale_at + 16 * j, b * bw, j);
      for (int i = 0; i < MR; ++i) {
        const __m512 ds = _mm512_set1_ps(a.scaled_sum[i * blocks + b]);
        for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_fmadd_ps(bias[j], ds, acc[i][j]);
      }
    }
  }
  for (int j = 0; j < 4; ++j) {
    const int c = 16 * j;
    if (c >= valid) break;
    const __mmask16 keep = valid - c >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (valid - c)) - 1);
    for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(out + i * ldo + c, keep, acc[i][j]);
  }
}

template <int Bits, bool Affine, DType S>
void run(const Int8Rows& a, const Weight& w, int64_t n_begin, int64_t n_end, float* out, int64_t ldo) {
  using TileFn = void (*)(const Int8Rows&, const Weight&, int64_t, float*, int64_t, int);
  static constexpr TileFn tiles[kMaxRows + 1] = {nullptr, tile<Bits, Affine, S, 1>, tile<Bits, Affine, S, 2>,
                                                 tile<Bits, Affine, S, 3>};
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kPanel64) {
    const int valid = static_cast<int>(std::min<int64_t>(kPanel64, n_end - n0));
    for (int64_t m = 0; m < a.rows; m += kMaxRows) {
      const int mr = static_cast<int>(std::min<int64_t>(kMaxRows, a.rows - m));
      tiles[mr](a.from(m), w, n0, out + m * ldo + n0, ldo, valid);
    }
  }
}

}  // namespace

void quantize_blocks_avx512(const float* x, int64_t blocks, int64_t block, int8_t* q, float* scale, int32_t* sum,
                            float* scaled_sum) {
  const __m512 round = _mm512_set1_ps(12582912.f);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  const int64_t vectors = block / 16;
  for (int64_t i = 0; i < blocks; ++i) {
    const float* xb = x + i * block;
    // max is exact: any order gives the portable loop's value.
    __m512 m = _mm512_abs_ps(_mm512_loadu_ps(xb));
    for (int64_t v = 1; v < vectors; ++v) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(xb + 16 * v)));
    const float amax = _mm512_reduce_max_ps(m);
    const float d = amax / 127.f, inverse = d != 0.f ? 1.f / d : 0.f;
    const __m512 inv = _mm512_set1_ps(inverse);
    __m512i total = _mm512_setzero_si512();
    for (int64_t v = 0; v < vectors; ++v) {
      const __m512 rounded = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(xb + 16 * v), inv), round), round);
      const __m512i c = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvttps_epi32(rounded), lo), hi);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i * block + 16 * v), _mm512_cvtepi32_epi8(c));
      total = _mm512_add_epi32(total, c);
    }
    const int32_t sum_q = _mm512_reduce_add_epi32(total);
    scale[i] = d;
    sum[i] = sum_q;
    scaled_sum[i] = d * static_cast<float>(sum_q);
  }
}

void matmul_int8_avx512(const Int8Rows& a, const Weight& w, int64_t n_begin, int64_t n_end, float* out, int64_t ldo) {
  if (a.rows <= 0) return;
  if (w.quant.group % a.block != 0) std::abort();
  with_any_int8_weight_kind(w, [&](auto bits, auto affine, auto scale) {
    run<decltype(bits)::value, decltype(affine)::value, decltype(scale)::value>(a, w, n_begin, n_end, out, ldo);
  });
}

}  // namespace tachyon::kernels::cpu
