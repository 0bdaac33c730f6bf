// The load-time quantizers (kernels/quantize.h): round-trip error within each format's bound,
// the exact format parameters the kernels expect, and refusal of non-finite weights.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "base/error.h"
#include "kernels/backend.h"
#include "kernels/quantize.h"
#include "kernels/weight_dequant.h"
#include "test_data.h"

namespace tachyon::kernels {
namespace {

struct Source {
  std::vector<float> f32;
  std::vector<uint16_t> half;
  Weight w;
};
Source random_source(DType dtype, int64_t rows, int64_t cols, std::mt19937& rng) {
  Source s;
  s.f32 = random_vec(static_cast<size_t>(rows * cols), rng, 0.05f);
  s.f32[3] = 0.9f;  // an outlier: its group's step is large, the others' small
  if (dtype == DType::F32) {
    s.w = Weight{s.f32.data(), DType::F32, rows, cols};
    return s;
  }
  for (float& v : s.f32) {
    s.half.push_back(dtype == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v));
    v = dtype == DType::BF16 ? bf16_to_f32(s.half.back()) : f16_to_f32(s.half.back());
  }
  s.w = Weight{s.half.data(), dtype, rows, cols};
  return s;
}

class Quantize : public ::testing::TestWithParam<DType> {
 protected:
  std::mt19937 rng{21};
};

TEST_P(Quantize, Int8PerRowWithinHalfAStep) {
  const Source s = random_source(GetParam(), 37, 96, rng);
  const QuantizedWeight q = quantize_int8(s.w);
  ASSERT_EQ(q.weight.dtype, DType::I8);
  ASSERT_NE(q.weight.scales, nullptr);
  const auto* codes = static_cast<const int8_t*>(q.weight.data);
  for (int64_t r = 0; r < 37; ++r) {
    float peak = 0.f;
    for (int64_t c = 0; c < 96; ++c) peak = std::max(peak, std::fabs(s.f32[r * 96 + c]));
    EXPECT_FLOAT_EQ(q.weight.scales[r], peak / 127.f);
    for (int64_t c = 0; c < 96; ++c) {
      const float back = codes[r * 96 + c] * q.weight.scales[r];
      EXPECT_LE(std::fabs(back - s.f32[r * 96 + c]), 0.5001f * q.weight.scales[r]) << r << "," << c;
    }
  }
}

TEST_P(Quantize, Int4AffineWithinHalfAStep) {
  const Source s = random_source(GetParam(), 19, 256, rng);
  const QuantizedWeight q = quantize_int4(s.w);
  const Weight& w = q.weight;
  ASSERT_EQ(w.format, WeightFormat::Affine);
  ASSERT_EQ(w.quant.bits, 4);
  ASSERT_EQ(w.quant.group, 64);
  ASSERT_EQ(w.quant.scale_dtype, DType::F16);
  double worst_ratio = 0;
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < w.cols; ++c) {
      const int64_t g = r * (w.cols / 64) + c / 64;
      const float step = load_scale_value(w.quant.scales, DType::F16, g);
      const float lo = load_scale_value(w.quant.biases, DType::F16, g);
      const float err = std::fabs(dequantize_element(w, r, c) - s.f32[r * w.cols + c]);
      // Half a step, plus the f16 rounding of the bias and of 15 steps.
      EXPECT_LE(err, 0.5f * step + std::ldexp(std::fabs(lo) + 15 * step, -10)) << r << "," << c;
      worst_ratio = std::max(worst_ratio, double(err) / step);
    }
  EXPECT_GT(worst_ratio, 0.3);  // the bound is not trivially loose
}

TEST_P(Quantize, Fp8BlockWithinHalfAnUlp) {
  const Source s = random_source(GetParam(), 200, 300, rng);  // partial blocks on both edges
  const QuantizedWeight q = quantize_fp8(s.w);
  const Weight& w = q.weight;
  ASSERT_EQ(w.format, WeightFormat::Fp8Block);
  ASSERT_EQ(w.quant.group, 128);
  const auto* scales = static_cast<const float*>(w.quant.scales);
  for (int64_t br = 0; br < 2; ++br)
    for (int64_t bc = 0; bc < 3; ++bc) {
      float peak = 0.f;
      for (int64_t r = br * 128; r < std::min<int64_t>(200, br * 128 + 128); ++r)
        for (int64_t c = bc * 128; c < std::min<int64_t>(300, bc * 128 + 128); ++c) peak = std::max(peak, std::fabs(s.f32[r * 300 + c]));
      EXPECT_EQ(scales[br * 3 + bc], peak / 448.f);
    }
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < w.cols; ++c) {
      const float v = s.f32[r * w.cols + c], scale = scales[(r / 128) * 3 + c / 128];
      // e4m3: 3 mantissa bits (half an ulp: 2^-4 relative), subnormal steps of 2^-9.
      const float bound = std::max(std::ldexp(std::fabs(v), -4), std::ldexp(scale, -10)) * 1.0001f;
      EXPECT_LE(std::fabs(dequantize_element(w, r, c) - v), bound) << r << "," << c;
    }
}

INSTANTIATE_TEST_SUITE_P(Sources, Quantize, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(QuantizeFailsClosed, NonFiniteWeightsAreRefused) {
  std::vector<float> w(64 * 4, 0.25f);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    w[77] = bad;
    const Weight src{w.data(), DType::F32, 4, 64};
    EXPECT_THROW(quantize_int8(src), Error);
    EXPECT_THROW(quantize_int4(src), Error);
    EXPECT_THROW(quantize_fp8(src), Error);
  }
  try {
    w[77] = NAN;
    quantize_int4(Weight{w.data(), DType::F32, 4, 64});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("element (1, 13)"), std::string::npos) << e.what();
  }
}

TEST(QuantizeFailsClosed, Int4NeedsWholeGroupsAndFloatInput) {
  std::vector<float> w(96 * 2, 0.5f);
  EXPECT_THROW(quantize_int4(Weight{w.data(), DType::F32, 2, 96}), Error);  // 96 % 64 != 0
  EXPECT_NO_THROW(quantize_int4(Weight{w.data(), DType::F32, 2, 96}, 32));
  std::vector<int8_t> codes(96 * 2);
  EXPECT_THROW(quantize_fp8(Weight{codes.data(), DType::I8, 2, 96}), Error);
}

TEST(QuantizeFailsClosed, ZeroWeightsQuantizeToZero) {
  std::vector<float> w(128 * 2, 0.f);
  const Weight src{w.data(), DType::F32, 2, 128};
  for (const QuantizedWeight& q : {quantize_int4(src), quantize_fp8(src)})
    for (int64_t c = 0; c < 128; ++c) EXPECT_EQ(dequantize_element(q.weight, 1, c), 0.f);
  const QuantizedWeight q8 = quantize_int8(src);
  EXPECT_EQ(q8.weight.scales[1], 0.f);
}

// A quantized weight runs on the CPU backend like its dequantized values (end to end from a
// float checkpoint's matrix).
TEST(QuantizeOnBackends, QuantizedMatmulIsTheDequantizedMatmul) {
  std::mt19937 rng(5);
  const Source s = random_source(DType::BF16, 70, 128, rng);
  auto cpu = make_backend("cpu");
  for (const QuantizedWeight& q : {quantize_int8(s.w), quantize_int4(s.w), quantize_fp8(s.w)}) {
    std::vector<float> dense(70 * 128);
    for (int64_t r = 0; r < 70; ++r)
      for (int64_t c = 0; c < 128; ++c)
        dense[r * 128 + c] = q.weight.quantized() ? dequantize_element(q.weight, r, c)
                                                  : static_cast<const int8_t*>(q.weight.data)[r * 128 + c] * q.weight.scales[r];
    const Weight wq = cpu->upload_weight(q.weight), wd = cpu->upload_weight(Weight{dense.data(), DType::F32, 70, 128});
    const auto x = random_vec(2 * 128, rng);
    std::vector<float> a(2 * 70), b(2 * 70);
    cpu->matmul(x.data(), 2, wq, nullptr, a.data());
    cpu->matmul(x.data(), 2, wd, nullptr, b.data());
    if (q.weight.quantized()) {
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
    } else {
      EXPECT_LT(max_rel(a, b), 1e-5);  // int8 scales the chain's result, not each weight
    }
    EXPECT_LT(max_rel(a, b), 1e-5);
  }
}

}  // namespace
}  // namespace tachyon::kernels
