// Random quantized host weights in every format of kernels/weight.h, and the canonical matmul
// over them (the scalar definition's f32 weights, then the sequential fma chain of cpu/dot.h).
#pragma once

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "kernels/quantize.h"
#include "kernels/weight_dequant.h"

namespace tachyon::kernels {

struct QuantHost {
  std::vector<uint8_t> codes, scales, biases;
  Weight w;
  QuantHost() = default;
  QuantHost(const QuantHost&) = delete;
  QuantHost& operator=(const QuantHost&) = delete;
  QuantHost(QuantHost&&) = default;
};

struct QuantCase {
  WeightFormat format;
  int bits;
  int group;
  DType scale_dtype;
  std::string name() const {
    static const char* kFormats[] = {"Dense", "Affine", "Symmetric", "Fp8Block", "Mxfp4"};
    return std::string(kFormats[static_cast<int>(format)]) + std::to_string(bits) + "_g" + std::to_string(group) + "_" +
           std::string(dtype_name(scale_dtype));
  }
};

// Every format x bits x group x scale dtype the kernels run.
inline std::vector<QuantCase> all_quant_cases() {
  std::vector<QuantCase> cases;
  for (WeightFormat f : {WeightFormat::Affine, WeightFormat::Symmetric})
    for (int bits : {4, 8})
      for (int group : {16, 32, 64, 128})
        for (DType s : {DType::F32, DType::F16, DType::BF16}) cases.push_back({f, bits, group, s});
  cases.push_back({WeightFormat::Fp8Block, 8, 128, DType::F32});
  cases.push_back({WeightFormat::Fp8Block, 8, 16, DType::F32});
  cases.push_back({WeightFormat::Mxfp4, 4, 32, DType::U8});
  return cases;
}

inline void push_scale(std::vector<uint8_t>& bytes, DType dtype, float v) {
  if (dtype == DType::F32) {
    uint8_t b[4];
    std::memcpy(b, &v, 4);
    bytes.insert(bytes.end(), b, b + 4);
  } else {
    const uint16_t h = dtype == DType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
    bytes.push_back(static_cast<uint8_t>(h & 0xff));
    bytes.push_back(static_cast<uint8_t>(h >> 8));
  }
}

// Random codes (no NaN codes), scales with a few zeros, and biases.
inline QuantHost random_quant(const QuantCase& qc, int64_t rows, int64_t cols, std::mt19937& rng) {
  QuantHost h;
  h.w = Weight{nullptr, DType::U8, rows, cols};
  h.w.format = qc.format;
  h.w.quant.bits = static_cast<uint8_t>(qc.bits);
  h.w.quant.group = qc.group;
  h.w.quant.scale_dtype = qc.scale_dtype;
  std::uniform_int_distribution<int> byte(0, 255);
  h.codes.resize(static_cast<size_t>(quant_code_bytes(h.w)));
  for (auto& b : h.codes) {
    b = static_cast<uint8_t>(byte(rng));
    if (qc.format == WeightFormat::Fp8Block && (b & 0x7f) == 0x7f) b ^= 1;  // e4m3fn NaN → 0x7e
  }
  const int64_t n = quant_scale_count(h.w);
  std::normal_distribution<float> scale(0.f, 0.05f), bias(0.f, 0.1f);
  std::uniform_int_distribution<int> exponent(118, 130);
  for (int64_t i = 0; i < n; ++i) {
    if (qc.format == WeightFormat::Mxfp4) {
      h.scales.push_back(static_cast<uint8_t>(i % 97 == 5 ? 0 : exponent(rng)));  // e = 0: 2^-127
    } else {
      push_scale(h.scales, qc.scale_dtype, i % 53 == 7 ? 0.f : scale(rng));
      if (qc.format == WeightFormat::Affine) push_scale(h.biases, qc.scale_dtype, bias(rng));
    }
  }
  h.w.data = h.codes.data();
  h.w.quant.scales = h.scales.data();
  h.w.quant.biases = h.biases.empty() ? nullptr : h.biases.data();
  return h;
}

// The row-major f32 weights of a quantized weight (its scalar definition).
inline std::vector<float> dequantized(const Weight& w) {
  std::vector<float> out(static_cast<size_t>(w.rows * w.cols));
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < w.cols; ++c) out[r * w.cols + c] = dequantize_element(w, r, c);
  return out;
}

// out[m, n] = fma chain over k of x[m, k] · w[n, k] (the canonical matmul, cpu/dot.h).
inline std::vector<float> canonical_matmul(const float* x, int64_t rows, const std::vector<float>& w, int64_t n,
                                           int64_t k) {
  std::vector<float> out(static_cast<size_t>(rows * n));
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.f;
      for (int64_t t = 0; t < k; ++t) acc = std::fma(x[m * k + t], w[j * k + t], acc);
      out[m * n + j] = acc;
    }
  return out;
}

}  // namespace tachyon::kernels
