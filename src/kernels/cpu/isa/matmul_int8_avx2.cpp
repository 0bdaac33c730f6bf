// AVX2 int8-activation matmul (cpu/isa/matmul_int8.h) for CPUs without AVX-512 VNNI. vpmaddubsw
// multiplies unsigned by signed bytes into saturating 16-bit pairs, so the codes go in as values
// whose pair sums fit: 4-bit codes (<= 15) as stored; 8-bit codes as u − 128 in [−128, 127],
// through |u − 128| and the activation with its sign (|pair| <= 2·128·127 < 2^15), and the
// 128·Σq the shift removed is added back to the exact int32 sum. One row at a time, 8 outputs per
// register, every block's integer sum finished before its float step (the canonical order).
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/isa/matmul_int8.h"
#include "kernels/weight_dequant.h"

namespace tachyon::kernels::cpu {

namespace {

constexpr int64_t kPanel = Weight::kPanel;

// 8 scales (or biases) at entry `index`; factored ones (S = I8): the int8 multipliers times the
// f32 factors at `factors` (weight.h), as weight_dequant.h's group_value computes them.
template <DType S>
inline __m256 load_scales8(const void* base, int64_t index, const float* factors, int64_t factor_index) {
  if constexpr (S == DType::I8) {
    const __m128i m = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const int8_t*>(base) + index));
    return _mm256_mul_ps(_mm256_loadu_ps(factors + factor_index), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(m)));
  }
  (void)factors;
  (void)factor_index;
  if constexpr (S == DType::F32) return _mm256_loadu_ps(static_cast<const float*>(base) + index);
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + index));
  if constexpr (S == DType::F16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

inline __m256i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Σ over 4 k of codes · activations, per 32-bit lane, added to acc.
inline __m256i dot4_small(__m256i acc, __m256i codes, __m256i act) {  // codes <= 15
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(codes, act), _mm256_set1_epi16(1)));
}
inline __m256i dot4_signed(__m256i acc, __m256i codes, __m256i act) {  // codes signed bytes
  const __m256i magnitude = _mm256_sign_epi8(codes, codes), signed_act = _mm256_sign_epi8(act, codes);
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, signed_act), _mm256_set1_epi16(1)));
}

template <int Bits, bool Affine, DType S>
void row_panel(const int8_t* q, const float* d, const int32_t* sums, const float* ds, int64_t bw, const Weight& w,
               int64_t n0, float* out, int valid) {
  const int64_t k = w.cols, blocks = k / bw, group_blocks = w.quant.group / bw;
  const int64_t groups = k / w.quant.group;
  const uint8_t* codes = static_cast<const uint8_t*>(w.data) + (n0 / kPanel) * k * kPanel * Bits / 8;
  const int64_t scale_base = (n0 / kPanel) * groups * kPanel;
  const int64_t spans = k / kFactorSpan, factor_base = (n0 / kPanel) * spans * kPanel;
  const auto factors_of = [&](const void* values) {
    return S == DType::I8 ? reinterpret_cast<const float*>(static_cast<const uint8_t*>(values) + factor_offset(w)) : nullptr;
  };
  const float* scale_factors = factors_of(w.quant.scales);
  const float* bias_factors = Affine ? factors_of(w.quant.biases) : nullptr;
  // Σ u·q = Σ q_w·q + z0·Σq; the 8-bit path computes Σ (u − 128)·q.
  const int32_t z0 = Affine ? 0 : (Bits == 8 ? 128 : Bits == 6 ? 32 : 8);
  const int32_t add_back = (Bits == 8 ? 128 : 0) - z0;
  __m256 acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
  const __m256i low_nibbles = _mm256_set1_epi8(0x0f), flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i top_bits = _mm256_set1_epi8(0x30);
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t scale_at = scale_base + (b / group_blocks) * kPanel;
    const __m256 d_b = _mm256_set1_ps(d[b]);
    const __m256i correction = _mm256_set1_epi32(add_back * sums[b]);
    const int64_t factor_at = factor_base + (b * bw / kFactorSpan) * kPanel;
    for (int j = 0; j < 8; ++j) {
      __m256i isum = _mm256_setzero_si256();
      // The block's 16-column steps, into the same exact int32 sum.
      for (int64_t k0 = b * bw; k0 < (b + 1) * bw; k0 += kInt8MinBlock) {
        const int8_t* qb = q + k0;
        const uint8_t* p = codes + k0 * kPanel * Bits / 8 + 32 * j;
        if constexpr (Bits == 8) {
          for (int o = 0; o < 4; ++o) {
            const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + o * 256));
            isum = dot4_signed(isum, _mm256_xor_si256(u, flip), broadcast4(qb + 4 * o));
          }
        } else if constexpr (Bits == 4) {
          for (int o = 0; o < 2; ++o) {
            const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + o * 256));
            isum = dot4_small(isum, _mm256_and_si256(raw, low_nibbles), broadcast4(qb + 8 * o));
            isum = dot4_small(isum, _mm256_and_si256(_mm256_srli_epi16(raw, 4), low_nibbles), broadcast4(qb + 8 * o + 4));
          }
        } else {  // 6-bit codes (<= 63): a nibble joined by its quad's two top bits (weight.h)
          const __m256i top = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 512));
          for (int o = 0; o < 2; ++o) {
            const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + o * 256));
            const __m256i lo_top = o == 0 ? _mm256_slli_epi16(top, 4) : top;
            const __m256i hi_top = o == 0 ? _mm256_slli_epi16(top, 2) : _mm256_srli_epi16(top, 2);
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(raw, low_nibbles), _mm256_and_si256(lo_top, top_bits));
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), low_nibbles),
                                               _mm256_and_si256(hi_top, top_bits));
            isum = dot4_small(isum, lo, broadcast4(qb + 8 * o));
            isum = dot4_small(isum, hi, broadcast4(qb + 8 * o + 4));
          }
        }
      }
      isum = _mm256_add_epi32(isum, correction);
      const __m256 s = load_scales8<S>(w.quant.scales, scale_at + 8 * j, scale_factors, factor_at + 8 * j);
      acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(s, d_b), _mm256_cvtepi32_ps(isum), acc[j]);
      if constexpr (Affine)
        acc[j] = _mm256_fmadd_ps(load_scales8<S>(w.quant.biases, scale_at + 8 * j, bias_factors, factor_at + 8 * j),
                                 _mm256_set1_ps(ds[b]), acc[j]);
    }
  }
  alignas(32) float lanes[kPanel];
  for (int j = 0; j < 8; ++j) _mm256_store_ps(lanes + 8 * j, acc[j]);
  std::copy(lanes, lanes + valid, out);
}

template <int Bits, bool Affine, DType S>
void run(const Int8Rows& a, const Weight& w, int64_t n_begin, int64_t n_end, float* out, int64_t ldo) {
  const int64_t blocks = a.blocks();
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kPanel) {
    const int valid = static_cast<int>(std::min<int64_t>(kPanel, n_end - n0));
    for (int64_t m = 0; m < a.rows; ++m)
      row_panel<Bits, Affine, S>(a.q + m * a.cols, a.scale + m * blocks, a.sum + m * blocks,
                                 a.scaled_sum + m * blocks, a.block, w, n0, out + m * ldo + n0, valid);
  }
}

}  // namespace

void matmul_int8_avx2(const Int8Rows& a, const Weight& w, int64_t n_begin, int64_t n_end, float* out, int64_t ldo) {
  if (w.quant.group % a.block != 0) std::abort();
  with_any_int8_weight_kind(w, [&](auto bits, auto affine, auto scale) {
    run<decltype(bits)::value, decltype(affine)::value, decltype(scale)::value>(a, w, n_begin, n_end, out, ldo);
  });
}

}  // namespace tachyon::kernels::cpu
