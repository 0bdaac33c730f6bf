// The scalar definition of every weight format of kernels/weight.h, for row-major (host)
// weights: what one element is worth. Backends' kernels give these bits; loaders and tests use
// them to check what they packed. Every backend computes a quantized matmul as this f32 value
// of each element followed by the dense weights' sequential fma chain over k (cpu/dot.h).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/weight.h"

namespace tachyon::kernels {

// e2m1 (MXFP4): sign, 2 exponent bits, 1 mantissa bit.
inline float e2m1_to_f32(uint8_t code) {
  static constexpr float kValues[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  return (code & 8u) ? -kValues[code & 7u] : kValues[code & 7u];
}
// e8m0 (MX scales): 2^(e − 127); 255 is NaN.
inline float e8m0_to_f32(uint8_t e) { return e == 255 ? NAN : std::ldexp(1.f, static_cast<int>(e) - 127); }

inline float load_scale_value(const void* p, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::F32: return static_cast<const float*>(p)[index];
    case DType::F16: return tachyon::f16_to_f32(static_cast<const uint16_t*>(p)[index]);
    case DType::BF16: return tachyon::bf16_to_f32(static_cast<const uint16_t*>(p)[index]);
    case DType::U8: return e8m0_to_f32(static_cast<const uint8_t*>(p)[index]);
    default: return NAN;
  }
}

// Columns per scale of a quantized weight (Mxfp4: always 32).
inline int64_t quant_group(const Weight& w) { return w.format == WeightFormat::Mxfp4 ? 32 : w.quant.group; }

// The code of element (r, c) of a quantized weight as its format defines it, row-major, Panel64
// or Panel64Dot (weight.h).
inline uint32_t code_at(const Weight& w, int64_t r, int64_t c) {
  const auto* bytes = static_cast<const uint8_t*>(w.data);
  if (w.layout == WeightLayout::Panel64Dot) {  // stored u = q + z0: back to the format's code
    const int64_t j = r % Weight::kPanel, base = (r / Weight::kPanel) * w.cols;
    const bool symmetric = w.format == WeightFormat::Symmetric;
    if (w.quant.bits == 8) return bytes[(base + c - c % 4) * Weight::kPanel + 4 * j + c % 4] ^ (symmetric ? 0x80u : 0u);
    if (w.quant.bits == 6) {  // the 8-bit code it stands for
      const uint8_t* step = bytes + (base + c - c % 16) * 48;
      const uint8_t nibble = step[(c % 16 / 8) * 256 + 4 * j + c % 4];
      const uint32_t top = (step[512 + 4 * j + c % 4] >> (2 * (c % 16 / 4))) & 3u;
      const uint32_t u = ((c % 8 < 4) ? (nibble & 0xfu) : (nibble >> 4)) | (top << 4);
      return symmetric ? static_cast<uint8_t>(static_cast<int32_t>(u) - 32) : u;
    }
    const uint8_t byte = bytes[(base + c - c % 8) * (Weight::kPanel / 2) + 4 * j + c % 4];
    return ((c % 8 < 4) ? (byte & 0xfu) : (byte >> 4)) ^ (symmetric ? 8u : 0u);
  }
  if (w.layout == WeightLayout::Panel64) {
    const int64_t j = r % Weight::kPanel, step = (r / Weight::kPanel) * w.cols + c;
    if (w.quant.bits == 8) return bytes[step * Weight::kPanel + j];
    const uint8_t byte = bytes[step * (Weight::kPanel / 2) + j % 32];
    return j < 32 ? (byte & 0xfu) : (byte >> 4);
  }
  const int64_t i = r * w.cols + c;
  if (w.quant.bits == 8) return bytes[i];
  return (i % 2 == 0) ? (bytes[i / 2] & 0xfu) : (bytes[i / 2] >> 4);
}

// Index of the scale (and bias) of element (r, c) in `quant.scales` for the weight's layout.
inline int64_t scale_index(const Weight& w, int64_t r, int64_t c) {
  const int64_t group = quant_group(w);
  if (w.layout == WeightLayout::Panel64 || w.layout == WeightLayout::Panel64Dot) {
    const int64_t groups = (w.cols + group - 1) / group;
    return ((r / Weight::kPanel) * groups + c / group) * Weight::kPanel + r % Weight::kPanel;
  }
  if (w.format == WeightFormat::Fp8Block) return (r / group) * ((w.cols + group - 1) / group) + c / group;
  return r * (w.cols / group) + c / group;
}

// Columns sharing one factor of factored (I8) scales, and where the factors start in the scales
// (biases) buffer of a Panel64Dot weight (weight.h).
constexpr int64_t kFactorSpan = 256;
inline int64_t factor_offset(const Weight& w) {
  const int64_t padded = (w.rows + Weight::kPanel - 1) / Weight::kPanel * Weight::kPanel;
  return (padded * ((w.cols + quant_group(w) - 1) / quant_group(w)) + 63) / 64 * 64;
}
// The f32 scale (or bias: `values` = quant.biases) of element (r, c), whatever its storage.
inline float group_value(const Weight& w, const void* values, int64_t r, int64_t c) {
  const int64_t s = scale_index(w, r, c);
  if (w.quant.scale_dtype != DType::I8) return load_scale_value(values, w.quant.scale_dtype, s);
  const auto* factors = reinterpret_cast<const float*>(static_cast<const uint8_t*>(values) + factor_offset(w));
  const int64_t f = ((r / Weight::kPanel) * (w.cols / kFactorSpan) + c / kFactorSpan) * Weight::kPanel + r % Weight::kPanel;
  return factors[f] * static_cast<float>(static_cast<const int8_t*>(values)[s]);
}

// Element (r, c) of a weight in a quantized format (WeightFormat other than Dense), row-major,
// Panel64 or Panel64Dot.
inline float dequantize_element(const Weight& w, int64_t r, int64_t c) {
  const QuantParams& q = w.quant;
  const uint32_t code = code_at(w, r, c);
  const int64_t s = scale_index(w, r, c);
  switch (w.format) {
    case WeightFormat::Affine:
      return std::fma(static_cast<float>(code), group_value(w, q.scales, r, c), group_value(w, q.biases, r, c));
    case WeightFormat::Symmetric: {
      const int32_t value = q.bits >= 6 ? static_cast<int8_t>(code) : static_cast<int32_t>(code ^ 8u) - 8;
      return static_cast<float>(value) * group_value(w, q.scales, r, c);
    }
    case WeightFormat::Fp8Block:
      return tachyon::fp8_e4m3_to_f32(static_cast<uint8_t>(code)) * static_cast<const float*>(q.scales)[s];
    case WeightFormat::Mxfp4:
      return e2m1_to_f32(static_cast<uint8_t>(code)) * e8m0_to_f32(static_cast<const uint8_t*>(q.scales)[s]);
    case WeightFormat::Dense: break;
  }
  return NAN;
}

// Bytes a row-major weight of this format occupies with its scales and biases (for `info` and
// memory budgets).
inline int64_t weight_bytes(const Weight& w) {
  const QuantParams& q = w.quant;
  switch (w.format) {
    case WeightFormat::Dense:
      return w.rows * w.cols * static_cast<int64_t>(tachyon::dtype_size(w.dtype)) + (w.scales ? w.rows * 4 : 0);
    case WeightFormat::Affine:
    case WeightFormat::Symmetric: {
      const int64_t groups = w.rows * (w.cols / q.group);
      return w.rows * w.cols * q.bits / 8 +
             groups * static_cast<int64_t>(tachyon::dtype_size(q.scale_dtype)) * (w.format == WeightFormat::Affine ? 2 : 1);
    }
    case WeightFormat::Fp8Block:
      return w.rows * w.cols + ((w.rows + q.group - 1) / q.group) * ((w.cols + q.group - 1) / q.group) * 4;
    case WeightFormat::Mxfp4: return w.rows * w.cols / 2 + w.rows * (w.cols / 32);
  }
  return 0;
}

}  // namespace tachyon::kernels
