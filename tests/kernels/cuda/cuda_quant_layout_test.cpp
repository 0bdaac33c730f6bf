// The CUDA layout of quantized weights (kernels/cuda/quant_layout.h) against the host definition
// (kernels/weight_dequant.h), on the CPU: every code where the decode kernel's lanes read it (the
// kernel's own extraction, lane_code), every scale where the kernels look it up, zero padding, and
// the upload's errors. Runs without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "base/error.h"
#include "kernels/cuda/quant_pack.h"
#include "kernels/cuda/quant_value.h"
#include "quant_test_data.h"

namespace tachyon::kernels {
namespace {

using cuda::QuantHostCopy;
using cuda::QuantMatrix;

// Scale of element (r, c) as stored (f32/f16/bf16 -> f32).
float stored_scale(const QuantHostCopy& p, const std::vector<uint8_t>& bytes, int64_t i) {
  return load_scale_value(bytes.data(), cuda::quant_scale_dtype(p.layout.scale_type), i);
}

// The decode kernel's walk: row tile, 32-column unit, lane, slot j -> the code it dequantizes for
// (row, column) = (8·tile + lane/4, 32·unit + 16·(j/4) + 8·(j/2 % 2) + 2·(lane % 4) + j % 2).
void expect_kernel_walk_reads_every_code(const HostQuant& hq, const QuantHostCopy& p) {
  const Weight& w = hq.weight();
  const QuantMatrix& m = p.layout;
  const int64_t upv = m.units_per_vector(), vpt = m.vectors_per_tile();
  int64_t checked = 0, mismatches = 0;
  for (int64_t tile = 0; tile < m.rows_padded() / 8; ++tile)
    for (int64_t unit = 0; unit < m.units_per_row_tile(); ++unit)
      for (int lane = 0; lane < 32; ++lane) {
        uint32_t words[4];
        std::memcpy(words, p.codes.data() + ((tile * vpt + unit / upv) * 32 + lane) * 16, 16);
        for (int j = 0; j < 8; ++j) {
          const int64_t r = tile * 8 + lane / 4,
                        c = unit * 32 + 16 * (j / 4) + 8 * (j / 2 % 2) + 2 * (lane % 4) + j % 2;
          const uint32_t got = cuda::lane_code(words, static_cast<int>(unit % upv), j, m.bits());
          uint32_t expect = 0;
          if (r < w.rows && c < w.cols) {
            const int64_t i = r * w.cols + c;
            const auto* bytes = static_cast<const uint8_t*>(w.data);
            expect = m.bits() == 8 ? bytes[i] : (i % 2 == 0 ? bytes[i / 2] & 0xfu : bytes[i / 2] >> 4u);
            ++checked;
          }
          if (got != expect && ++mismatches < 5)
            ADD_FAILURE() << "row " << r << " col " << c << ": code " << got << ", expected " << expect;
        }
      }
  EXPECT_EQ(checked, w.rows * w.cols);
  EXPECT_EQ(mismatches, 0);
}

TEST(CudaQuantLayout, EveryCodeAndScaleIsWhereTheKernelsReadIt) {
  std::mt19937 rng(11);
  for (const QuantCase& qc : quant_cases()) {
    // Rows not a multiple of 8 or 128; columns with a partial 512-column segment and, for 4-bit
    // codes, a partial 16-byte vector (1152 = 36 units: 9 vectors; 640 = 20 units; fp8: 1100 not a
    // multiple of its 128-column block).
    const int64_t cols = qc.format == WeightFormat::Fp8Block ? 1100 : qc.bits == 4 ? 640 : 1152;
    for (int64_t rows : {int64_t{5}, int64_t{203}}) {
      SCOPED_TRACE(qc.name + " " + std::to_string(rows) + "x" + std::to_string(cols));
      const HostQuant hq(qc, rows, cols, rng);
      const QuantHostCopy p = cuda::pack_quant_weight(hq.weight());
      const QuantMatrix& m = p.layout;
      ASSERT_EQ(static_cast<int64_t>(p.codes.size()), m.code_bytes());
      expect_kernel_walk_reads_every_code(hq, p);
      // code_byte, the scalar kernels' (embedding, dequantizing copies) lookup, agrees.
      for (int64_t r = 0; r < rows; r += 7)
        for (int64_t c = 0; c < cols; c += 3) {
          int shift = 0;
          const uint32_t code =
              (p.codes[static_cast<size_t>(m.code_byte(r, c, shift))] >> shift) & (m.bits() == 8 ? 0xffu : 0xfu);
          ASSERT_EQ(code, code_at(hq.weight(), r, c)) << r << ", " << c;
        }
      if (m.kind == cuda::kQuantInt8Rows) {
        ASSERT_EQ(static_cast<int64_t>(p.row_scales.size()), m.rows_padded());
        for (int64_t r = 0; r < m.rows_padded(); ++r)
          EXPECT_EQ(p.row_scales[static_cast<size_t>(r)], r < rows ? hq.weight().scales[r] : 0.f) << r;
        continue;
      }
      const size_t scale_size = m.scale_type == cuda::kScaleF32 ? 4 : 2;
      ASSERT_EQ(p.scales.size(), static_cast<size_t>(m.scale_count()) * scale_size);
      const bool affine = qc.format == WeightFormat::Affine;
      ASSERT_EQ(p.biases.size(), affine ? p.scales.size() : 0u);
      // Each element's value from the stored scale equals the scalar definition (bit for bit).
      for (int64_t r = 0; r < m.rows_padded(); ++r)
        for (int64_t c = 0; c < m.cols_padded(); ++c) {
          const int64_t si = m.scale_index(r, c);
          const float s = stored_scale(p, p.scales, si), b = affine ? stored_scale(p, p.biases, si) : 0.f;
          if (r >= rows || c >= cols) {
            // Padding: zero scales (Fp8Block's last block may be real columns' block: its codes are zero).
            if (c >= (cols + m.group - 1) / m.group * m.group || r >= rows) {
              ASSERT_EQ(s, 0.f) << r << ", " << c;
            }
            ASSERT_EQ(b, 0.f);
            continue;
          }
          const QuantParams& q = hq.weight().quant;
          float expect_s = 0.f;
          switch (qc.format) {
            case WeightFormat::Fp8Block:
              expect_s =
                  static_cast<const float*>(q.scales)[(r / q.group) * ((cols + q.group - 1) / q.group) + c / q.group];
              break;
            case WeightFormat::Mxfp4:
              expect_s = e8m0_to_f32(static_cast<const uint8_t*>(q.scales)[r * (cols / 32) + c / 32]);
              break;
            default:
              expect_s = load_scale_value(q.scales, q.scale_dtype, r * (cols / q.group) + c / q.group);
          }
          ASSERT_EQ(s, expect_s) << r << ", " << c;
          if (affine) {
            ASSERT_EQ(b, load_scale_value(q.biases, q.scale_dtype, r * (cols / q.group) + c / q.group));
          }
        }
    }
  }
}

bool same_float(float a, float b) { return std::memcmp(&a, &b, 4) == 0 || (std::isnan(a) && std::isnan(b)); }

// The kernels' per-code arithmetic (quant_value.h, compiled here for the host) against the scalar
// definition, for every code of every kind and scales of every storage dtype (the stored value).
TEST(CudaQuantValue, EveryCodeIsItsScalarDefinition) {
  const float scales[] = {0.0123f, 3.5f, 1e-5f, -0.75f};
  for (float scale : scales)
    for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
      const float s = scale;
      const float stored = dtype == DType::F32   ? s
                           : dtype == DType::F16 ? f16_to_f32(f32_to_f16(scale))
                                                 : bf16_to_f32(f32_to_bf16(scale));
      const float bias = -7.25f * stored;
      for (int bits : {4, 8})
        for (uint32_t code = 0; code < (1u << bits); ++code) {
          uint8_t bytes[32] = {};
          bytes[0] = static_cast<uint8_t>(code);  // element (0, 0); 4-bit: the low nibble
          for (WeightFormat f : {WeightFormat::Affine, WeightFormat::Symmetric}) {
            Weight w{bytes, DType::U8, 1, 32};
            w.format = f;
            w.quant = QuantParams{static_cast<uint8_t>(bits), 32, DType::F32, &stored, &bias};
            const float expect = dequantize_element(w, 0, 0);
            float got = 0.f;
            if (f == WeightFormat::Affine)
              got = bits == 4 ? cuda::quant_value<cuda::kQuantAffine4>(code, stored, bias)
                              : cuda::quant_value<cuda::kQuantAffine8>(code, stored, bias);
            else
              got = bits == 4 ? cuda::quant_value<cuda::kQuantSymmetric4>(code, stored, 0.f)
                              : cuda::quant_value<cuda::kQuantSymmetric8>(code, stored, 0.f);
            EXPECT_TRUE(same_float(got, expect))
                << "bits " << bits << " code " << code << " format " << int(f) << ": " << got << " vs " << expect;
          }
          if (bits == 8) {
            EXPECT_TRUE(
                same_float(cuda::quant_value<cuda::kQuantFp8>(code, s, 0.f), fp8_e4m3_to_f32(uint8_t(code)) * s))
                << "fp8 code " << code;
            EXPECT_EQ(cuda::quant_value<cuda::kQuantInt8Rows>(code, 1.f, 0.f), float(int8_t(code))) << code;
          }
        }
    }
  // The decode kernels' 4-bit word path (nibble_values): every code in every nibble, unsigned and
  // two's complement, is small_uint_to_f32's value bit for bit (what quant_value computes from).
  std::mt19937 rng(5);
  for (int trial = 0; trial < 4096; ++trial) {
    uint32_t word = static_cast<uint32_t>(rng());
    if (trial < 16) word = 0x11111111u * static_cast<uint32_t>(trial);  // every code in every nibble
    float unsigned_q[8], signed_q[8];
    cuda::nibble_values<false>(word, unsigned_q);
    cuda::nibble_values<true>(word, signed_q);
    for (int j = 0; j < 8; ++j) {
      const uint32_t code = (word >> (4 * cuda::nibble_of_slot(j))) & 0xfu;
      ASSERT_TRUE(same_float(unsigned_q[j], cuda::small_uint_to_f32(code, 8388608.f))) << std::hex << word << " " << j;
      ASSERT_TRUE(same_float(signed_q[j], cuda::small_uint_to_f32(code ^ 8u, 8388616.f)))
          << std::hex << word << " " << j;
      ASSERT_EQ(signed_q[j], static_cast<float>(code >= 8 ? static_cast<int>(code) - 16 : static_cast<int>(code)));
    }
  }
  // The 8-bit word path (byte_values; on the host its reference expression, on the device a byte
  // permute that cuda_quant_tests checks bit for bit): every byte value in every position.
  for (uint32_t code = 0; code < 256; ++code) {
    const uint32_t word = code << 24 | ((code * 7u) & 0xffu) << 16 | ((code ^ 0x5au) & 0xffu) << 8 | (255u - code);
    float unsigned_q[4], signed_q[4];
    cuda::byte_values<false>(word, unsigned_q);
    cuda::byte_values<true>(word, signed_q);
    for (int j = 0; j < 4; ++j) {
      const uint32_t c = (word >> (8 * j)) & 0xffu;
      ASSERT_TRUE(same_float(unsigned_q[j], cuda::small_uint_to_f32(c, 8388608.f))) << word << " " << j;
      ASSERT_TRUE(same_float(signed_q[j], cuda::small_uint_to_f32(c ^ 0x80u, 8388736.f))) << word << " " << j;
      ASSERT_EQ(signed_q[j], static_cast<float>(static_cast<int8_t>(c)));
    }
  }
  // The e2m1 word path (e2m1_values: subnormal f32 bits scaled by 2^126): every code in every nibble.
  for (uint32_t code = 0; code < 16; ++code) {
    const uint32_t word = 0x11111111u * code ^ 0x0f0f0000u;
    float q[8];
    cuda::e2m1_values(word, q);
    for (int j = 0; j < 8; ++j)
      ASSERT_TRUE(same_float(q[j], cuda::e2m1_value((word >> (4 * cuda::nibble_of_slot(j))) & 0xfu)))
          << std::hex << word << " " << j;
  }
  // The decode kernels' paired e4m3 conversion: every pair of codes gives e4m3_value's values
  // (NaN codes: NaN). On the host the pair is two single conversions: this pins the byte order.
  for (uint32_t pair = 0; pair < 0x10000u; ++pair) {
    float lo = 0.f, hi = 0.f;
    cuda::e4m3_pair_values(pair | 0xabcd0000u, lo, hi);  // the upper half of the word is ignored
    ASSERT_TRUE(same_float(lo, cuda::e4m3_value(pair & 0xffu))) << std::hex << pair;
    ASSERT_TRUE(same_float(hi, cuda::e4m3_value(pair >> 8))) << std::hex << pair;
  }
  // Mxfp4: every e2m1 code times every e8m0 scale as the packer stores it (bf16).
  for (int e : {0, 1, 100, 120, 127, 200, 254}) {
    uint8_t codes[16] = {}, exponent = static_cast<uint8_t>(e);
    Weight w{codes, DType::U8, 1, 32};
    w.format = WeightFormat::Mxfp4;
    w.quant = QuantParams{4, 32, DType::U8, &exponent, nullptr};
    const cuda::QuantHostCopy p = cuda::pack_quant_weight(w);
    const float stored = bf16_to_f32(static_cast<uint16_t>(p.scales[0] | p.scales[1] << 8));
    ASSERT_TRUE(same_float(stored, e8m0_to_f32(exponent))) << "e8m0 " << e;
    for (uint32_t code = 0; code < 16; ++code)
      EXPECT_TRUE(same_float(cuda::quant_value<cuda::kQuantMxfp4>(code, stored, 0.f),
                             e2m1_to_f32(uint8_t(code)) * e8m0_to_f32(exponent)))
          << "e2m1 " << code << " e8m0 " << e;
  }
}

// The streaming decode kernel's ring units (quant_layout.h's stream_unit_*, the producer's bulk
// copies): a row tile's units cover its vectors; every element's code lies in its unit's vectors,
// and its scale at the index the consumer computes from the unit's first scale (the 16-column half
// of its 32-column unit, shifted by the group) inside the unit's run of scales, which starts and
// ends on 16-byte boundaries (bulk copies). Shapes with partial units, rows not a multiple of 8.
// Whether q·s + b (bf16 s and b, q < 16 or q in −8..7) is exactly an f32, by double arithmetic:
// q·s is exact in a double, and the sum is exact where TwoSum's error is zero.
bool f32_fma_is_exact(float q, float s, float b) {
  const double p = static_cast<double>(q) * s, sum = p + b, bv = sum - p, err = (p - (sum - bv)) + (b - bv);
  return err == 0.0 && static_cast<double>(static_cast<float>(sum)) == sum;
}

// The streaming kernel's bf16 pair decode (quant_pair_fragment) against the f32 decode, on the
// host: its masks take the fragment's pairs of slots from the layout's nibbles; bf16_pair_exact
// only admits groups where quant_value's f32 fma is exact for every code (so that its bf16_rn is
// the one rounding of fma.bf16x2), checked over random bf16 scales and biases of every exponent;
// it admits real-looking groups; and where it refuses, the two roundings can differ.
TEST(CudaQuantValue, Bf16PairDecodeHasTheF32DecodesBitsWhereTheChecksAdmitIt) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 4096; ++trial) {
    const uint32_t words[4] = {static_cast<uint32_t>(rng()), 0u, 0u, 0u};
    for (int p = 0; p < 4; ++p) {
      const uint32_t pair = ((words[0] >> (4 * p)) & 0x000f000fu) | 0x43004300u;
      ASSERT_EQ(pair & 0xffffu, 0x4300u | cuda::lane_code(words, 0, 2 * p, 4)) << std::hex << words[0] << " " << p;
      ASSERT_EQ(pair >> 16, 0x4300u | cuda::lane_code(words, 0, 2 * p + 1, 4)) << std::hex << words[0] << " " << p;
      ASSERT_EQ(bf16_to_f32(static_cast<uint16_t>(pair & 0xffffu)), 128.f + cuda::lane_code(words, 0, 2 * p, 4));
    }
  }
  int64_t admitted = 0, refused_inexact = 0;
  for (int trial = 0; trial < 200000; ++trial) {
    uint16_t s = static_cast<uint16_t>(rng()), b = static_cast<uint16_t>(rng());
    if (trial % 2 == 0) {  // b's exponent within 20 of s's, where exactness turns
      const int e = std::clamp(static_cast<int>((s >> 7) & 0xffu) + static_cast<int>(rng() % 41) - 20, 0, 254);
      b = static_cast<uint16_t>((b & 0x807fu) | (e << 7));
    }
    if (trial % 7 == 0) b = 0;
    const bool exact_claimed = cuda::bf16_pair_exact(s, b);
    bool all_exact = (s & 0x7f80u) != 0x7f80u && (b & 0x7f80u) != 0x7f80u;
    for (int q = 0; q < 16 && all_exact; ++q)
      all_exact = f32_fma_is_exact(static_cast<float>(q), bf16_to_f32(s), bf16_to_f32(b)) &&
                  f32_fma_is_exact(static_cast<float>(q - 8), bf16_to_f32(s), 0.f);
    if (exact_claimed) {
      ASSERT_TRUE(all_exact) << std::hex << "s " << s << " b " << b;
      ++admitted;
    } else if (!all_exact) {
      ++refused_inexact;
    }
  }
  EXPECT_GT(admitted, 50000);
  EXPECT_GT(refused_inexact, 1000);
  // Real groups: b = −z·s with z near the middle of the codes, scales of any size.
  int real_admitted = 0;
  std::uniform_real_distribution<float> z(0.5f, 15.f), exponent(-40.f, 10.f);
  for (int i = 0; i < 10000; ++i) {
    const float scale = std::exp2(exponent(rng));
    real_admitted += cuda::bf16_pair_exact(f32_to_bf16(scale), f32_to_bf16(-z(rng) * scale));
  }
  EXPECT_EQ(real_admitted, 10000);
  // Refused, and rightly: 3·s is a bf16 tie whose even neighbour is below it, b a tiny positive;
  // the f32 fma drops b and rounds the tie down, one rounding of the exact sum goes up.
  const uint16_t s = 0x3f83, b = f32_to_bf16(std::ldexp(1.f, -30));
  EXPECT_FALSE(cuda::bf16_pair_exact(s, b));
  const float f32_decode = std::fma(3.f, bf16_to_f32(s), bf16_to_f32(b));
  EXPECT_EQ(f32_to_bf16(f32_decode), 0x4044u);                      // 3.0625
  EXPECT_GT(3.0 * bf16_to_f32(s) + bf16_to_f32(b), 3.0703125);     // above the tie: 3.078125 is nearest
  EXPECT_NE(f32_to_bf16(f32_decode), 0x4045u);
}

// The packer allows the pair decode per matrix: 4-bit Affine or Symmetric codes with bf16 scales,
// every group admitted; one group refused, f16 scales, 8-bit codes or Mxfp4 keep the f32 decode.
TEST(CudaQuantLayout, ThePackerAllowsTheBf16PairDecodeOnlyWhereEveryGroupIsExact) {
  std::mt19937 rng(23);
  const auto packed_pairs = [&](WeightFormat format, int bits, DType scale_dtype, bool one_tiny_bias) {
    const int64_t rows = 24, cols = 256, group = 32, groups = rows * cols / group;
    std::vector<uint8_t> codes(static_cast<size_t>(rows * cols * bits / 8));
    for (auto& c : codes) c = static_cast<uint8_t>(rng());
    std::vector<uint16_t> scales(static_cast<size_t>(groups)), biases(static_cast<size_t>(groups));
    std::uniform_real_distribution<float> unit(0.5f, 1.5f);
    for (int64_t i = 0; i < groups; ++i) {
      const float s = unit(rng) * 0.01f, b = -8.f * unit(rng) * s;
      scales[static_cast<size_t>(i)] = scale_dtype == DType::F16 ? f32_to_f16(s) : f32_to_bf16(s);
      biases[static_cast<size_t>(i)] = scale_dtype == DType::F16 ? f32_to_f16(b) : f32_to_bf16(b);
    }
    if (one_tiny_bias) biases[static_cast<size_t>(groups / 2)] = f32_to_bf16(1e-12f);
    Weight w{codes.data(), DType::U8, rows, cols};
    w.format = format;
    w.quant = QuantParams{static_cast<uint8_t>(bits), static_cast<int32_t>(group), scale_dtype, scales.data(),
                          format == WeightFormat::Affine ? biases.data() : nullptr};
    return cuda::pack_quant_weight(w).layout.bf16_pairs;
  };
  EXPECT_TRUE(packed_pairs(WeightFormat::Affine, 4, DType::BF16, false));
  EXPECT_TRUE(packed_pairs(WeightFormat::Symmetric, 4, DType::BF16, false));
  EXPECT_FALSE(packed_pairs(WeightFormat::Affine, 4, DType::BF16, true));
  EXPECT_FALSE(packed_pairs(WeightFormat::Affine, 4, DType::F16, false));
  EXPECT_FALSE(packed_pairs(WeightFormat::Affine, 8, DType::BF16, false));
  EXPECT_FALSE(packed_pairs(WeightFormat::Symmetric, 8, DType::BF16, false));
  uint8_t codes[16] = {}, exponent = 127;
  Weight mx{codes, DType::U8, 1, 32};
  mx.format = WeightFormat::Mxfp4;
  mx.quant = QuantParams{4, 32, DType::U8, &exponent, nullptr};
  EXPECT_FALSE(cuda::pack_quant_weight(mx).layout.bf16_pairs);
}

TEST(CudaQuantLayout, StreamingUnitsHoldEveryCodeAndScaleInBulkCopyableRuns) {
  std::mt19937 rng(13);
  for (const QuantCase& qc : quant_cases()) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{100, 384}, {20, 2176}, {12, 4608}}) {
      SCOPED_TRACE(qc.name + " " + std::to_string(rows) + "x" + std::to_string(cols));
      const HostQuant hq(qc, rows, cols, rng);
      const QuantMatrix m = cuda::pack_quant_weight(hq.weight()).layout;
      const int64_t upt = m.stream_units_per_tile(), unit_cols = m.stream_unit_columns(), upv = m.units_per_vector();
      int64_t vectors = 0;
      for (int64_t ui = 0; ui < upt; ++ui) {
        ASSERT_GT(m.stream_unit_vectors(ui), 0);
        ASSERT_LE(m.stream_unit_vectors(ui), QuantMatrix::kStreamUnitVectors);
        vectors += m.stream_unit_vectors(ui);
      }
      ASSERT_EQ(vectors, m.vectors_per_tile());
      const bool grouped = m.kind != cuda::kQuantInt8Rows;
      const int64_t scale_size = m.scale_type == cuda::kScaleF32 ? 4 : 2;
      int shift = 0;
      while ((int64_t{1} << shift) < m.group) ++shift;
      for (int64_t tile = 0; tile < m.rows_padded() / 8; ++tile) {
        for (int64_t ui = 0; grouped && ui < upt; ++ui) {
          ASSERT_EQ(m.stream_unit_scale_index(tile, ui) * scale_size % 16, 0) << "tile " << tile << " unit " << ui;
          ASSERT_EQ(m.stream_unit_groups(ui) * 8 * scale_size % 16, 0) << "unit " << ui;
        }
        for (int64_t r = tile * 8; r < tile * 8 + 8; ++r)
          for (int64_t c = 0; c < m.cols_padded(); ++c) {
            const int64_t ui = c / unit_cols, vector = c / 32 / upv;
            ASSERT_GE(vector, ui * QuantMatrix::kStreamUnitVectors);
            ASSERT_LT(vector, ui * QuantMatrix::kStreamUnitVectors + m.stream_unit_vectors(ui)) << r << ", " << c;
            if (!grouped) continue;
            const int64_t in_unit = c % unit_cols, cu = in_unit / 32, t = in_unit % 32 / 16;
            const int64_t local = ((cu * 32 + 16 * t) >> shift) * 8 + r % 8;  // the consumer's index
            ASSERT_EQ(m.stream_unit_scale_index(tile, ui) + local, m.scale_index(r, c)) << r << ", " << c;
            ASSERT_LT(local, m.stream_unit_groups(ui) * 8) << r << ", " << c;
          }
      }
    }
  }
}

TEST(CudaQuantLayout, PaddingCodesAreZero) {
  std::mt19937 rng(3);
  const QuantCase qc{"affine4", WeightFormat::Affine, 4, 32, DType::F16};
  const HostQuant hq(qc, 9, 96, rng);  // 9 of 128 rows, 96 of 128 columns (two 4-unit vectors... one and a half)
  const QuantHostCopy p = cuda::pack_quant_weight(hq.weight());
  int64_t nonzero_nibbles = 0, real_nonzero = 0;
  for (uint8_t b : p.codes) nonzero_nibbles += (b & 0xf) != 0, nonzero_nibbles += (b >> 4) != 0;
  for (int64_t r = 0; r < 9; ++r)
    for (int64_t c = 0; c < 96; ++c) real_nonzero += code_at(hq.weight(), r, c) != 0;
  EXPECT_EQ(nonzero_nibbles, real_nonzero);
}

TEST(CudaQuantLayout, UnsupportedWeightsAreRejectedByName) {
  std::mt19937 rng(5);
  const HostQuant hq({"sym4", WeightFormat::Symmetric, 4, 32, DType::BF16}, 16, 96, rng);
  const auto expect_error = [](Weight w, const char* needle) {
    try {
      (void)cuda::pack_quant_weight(w);
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  Weight w = hq.weight();
  w.quant.group = 48;  // not a power of two
  expect_error(w, "group 48");
  w = hq.weight();
  w.quant.bits = 3;
  expect_error(w, "3 bits");
  w = hq.weight();
  w.quant.scale_dtype = DType::I32;
  expect_error(w, "I32");
  w = hq.weight();
  w.format = WeightFormat::Affine;  // no biases
  expect_error(w, "biases");
  w = hq.weight();
  w.cols = 95;
  expect_error(w, "even number of columns");
}

}  // namespace
}  // namespace tachyon::kernels
