// Random quantized weights for the CUDA quantized-format tests: row-major host weights in every
// format of kernels/weight.h (their codes, scales and biases owned here), and the bf16 matrix the
// CUDA backend must compute with (bf16_rn of the scalar definition, kernels/weight_dequant.h).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "kernels/weight_dequant.h"

namespace tachyon::kernels {

struct QuantCase {
  std::string name;
  WeightFormat format;
  int bits;
  int group;  // Fp8Block: the block edge; Dense (I8): unused
  DType scale_dtype;
};

// The formats the tests cover: 4 and 8 bits, groups 16-128, F16/BF16/F32 scales, Symmetric,
// Affine, Fp8Block, Mxfp4 and Dense I8 (per-row scales).
inline std::vector<QuantCase> quant_cases() {
  return {{"affine4_g32_f16", WeightFormat::Affine, 4, 32, DType::F16},
          {"affine4_g128_bf16", WeightFormat::Affine, 4, 128, DType::BF16},
          {"affine4_g16_bf16", WeightFormat::Affine, 4, 16, DType::BF16},
          {"affine8_g64_f32", WeightFormat::Affine, 8, 64, DType::F32},
          {"affine8_g16_f16", WeightFormat::Affine, 8, 16, DType::F16},
          {"symmetric4_g32_bf16", WeightFormat::Symmetric, 4, 32, DType::BF16},
          {"symmetric4_g64_f32", WeightFormat::Symmetric, 4, 64, DType::F32},
          {"symmetric8_g128_f16", WeightFormat::Symmetric, 8, 128, DType::F16},
          {"symmetric8_g32_bf16", WeightFormat::Symmetric, 8, 32, DType::BF16},
          {"fp8_block128", WeightFormat::Fp8Block, 8, 128, DType::F32},
          {"mxfp4", WeightFormat::Mxfp4, 4, 32, DType::U8},
          {"int8_rows", WeightFormat::Dense, 8, 0, DType::F32}};
}

// A row-major quantized [rows, cols] weight with random codes and scales of magnitude ~0.01-0.1.
class HostQuant {
 public:
  HostQuant(const QuantCase& qc, int64_t rows, int64_t cols, std::mt19937& rng) {
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> unit(0.5f, 1.5f);
    const int64_t n = rows * cols;
    codes_.resize(static_cast<size_t>(qc.bits == 8 ? n : (n + 1) / 2));
    for (auto& b : codes_) {
      b = static_cast<uint8_t>(byte(rng));
      if (qc.format == WeightFormat::Fp8Block && (b & 0x7f) == 0x7f) b ^= 1;  // no NaN codes
    }
    w_.data = codes_.data();
    w_.dtype = qc.format == WeightFormat::Dense ? DType::I8 : DType::U8;
    w_.rows = rows;
    w_.cols = cols;
    w_.format = qc.format;
    w_.quant.bits = static_cast<uint8_t>(qc.bits);
    w_.quant.group = qc.group;
    w_.quant.scale_dtype = qc.scale_dtype;
    const auto put = [&](std::vector<uint8_t>& dst, int64_t count, auto value_of) {
      const size_t size = dtype_size(qc.scale_dtype);
      dst.resize(static_cast<size_t>(count) * size);
      for (int64_t i = 0; i < count; ++i) {
        const float f = value_of(i);
        if (qc.scale_dtype == DType::F32)
          std::memcpy(dst.data() + i * 4, &f, 4);
        else {
          const uint16_t h = qc.scale_dtype == DType::F16 ? f32_to_f16(f) : f32_to_bf16(f);
          std::memcpy(dst.data() + i * 2, &h, 2);
        }
      }
    };
    switch (qc.format) {
      case WeightFormat::Dense:
        row_scales_.resize(static_cast<size_t>(rows));
        for (auto& s : row_scales_) s = unit(rng) * 0.001f;
        w_.scales = row_scales_.data();
        break;
      case WeightFormat::Affine:
      case WeightFormat::Symmetric: {
        const int64_t groups = rows * (cols / qc.group);
        const float base = qc.bits == 8 ? 0.0008f : 0.012f;
        std::vector<float> s(static_cast<size_t>(groups));
        for (auto& v : s) v = unit(rng) * base;
        put(scales_, groups, [&](int64_t i) { return s[static_cast<size_t>(i)]; });
        w_.quant.scales = scales_.data();
        if (qc.format == WeightFormat::Affine) {  // b = −z·s with a zero point near the middle
          const float mid = qc.bits == 8 ? 128.f : 8.f;
          put(biases_, groups, [&](int64_t i) { return -mid * unit(rng) * s[static_cast<size_t>(i)]; });
          w_.quant.biases = biases_.data();
        }
        break;
      }
      case WeightFormat::Fp8Block: {
        const int64_t g = qc.group, count = ((rows + g - 1) / g) * ((cols + g - 1) / g);
        put(scales_, count, [&](int64_t) { return unit(rng) * 0.0005f; });
        w_.quant.scales = scales_.data();
        break;
      }
      case WeightFormat::Mxfp4: {
        std::uniform_int_distribution<int> e(127 - 7, 127 - 4);
        scales_.resize(static_cast<size_t>(rows * (cols / 32)));
        for (auto& b : scales_) b = static_cast<uint8_t>(e(rng));
        w_.quant.scales = scales_.data();
        break;
      }
    }
  }
  HostQuant(const HostQuant&) = delete;
  HostQuant& operator=(const HostQuant&) = delete;

  const Weight& weight() const { return w_; }
  // Element (r, c) by the scalar definition (Dense I8: code · row scale).
  float element(int64_t r, int64_t c) const {
    if (w_.format == WeightFormat::Dense)
      return static_cast<float>(static_cast<const int8_t*>(w_.data)[r * w_.cols + c]) *
             row_scales_[static_cast<size_t>(r)];
    return dequantize_element(w_, r, c);
  }
  // The bf16 matrix the CUDA matmul runs (not for Dense I8, whose codes run unscaled).
  std::vector<uint16_t> bf16_matrix() const {
    std::vector<uint16_t> out(static_cast<size_t>(w_.rows * w_.cols));
    for (int64_t r = 0; r < w_.rows; ++r)
      for (int64_t c = 0; c < w_.cols; ++c) out[static_cast<size_t>(r * w_.cols + c)] = f32_to_bf16(element(r, c));
    return out;
  }

 private:
  std::vector<uint8_t> codes_, scales_, biases_;
  std::vector<float> row_scales_;
  Weight w_;
};

}  // namespace tachyon::kernels
