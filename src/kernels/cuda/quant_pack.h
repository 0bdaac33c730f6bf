// Host side of quantized weight uploads: checks a row-major quantized Weight (kernels/weight.h)
// and repacks its codes, scales and biases into the CUDA layout of quant_layout.h, ready to copy
// to the device. Plain C++ (no CUDA headers): the CPU tests check it element by element.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cuda/quant_layout.h"
#include "kernels/weight.h"

namespace tachyon::kernels::cuda {

// Whether the CUDA backend uploads `w` through this packer (a quantized format, or Dense I8).
inline bool is_quant_upload(const Weight& w) { return w.quantized() || w.dtype == DType::I8; }

struct QuantHostCopy {
  QuantMatrix layout;             // its pointers null: the caller sets the device copies
  std::vector<uint8_t> codes;     // layout.code_bytes()
  std::vector<uint8_t> scales;    // layout.scale_count() values of layout.scale_type
  std::vector<uint8_t> biases;    // Affine: as scales; else empty
  std::vector<float> row_scales;  // Int8Rows: [rows128]; else empty
};

// The kind and scale storage the CUDA kernels use for `w`; throws naming what is unsupported.
QuantMatrix quant_layout_of(const Weight& w);
// Repacks a row-major weight (matrix: rows >= 1) into the device layout; throws on bad input.
QuantHostCopy pack_quant_weight(const Weight& w);
// The DType of a QuantScale (F32, F16, BF16) and back.
DType quant_scale_dtype(int scale_type);

}  // namespace tachyon::kernels::cuda
