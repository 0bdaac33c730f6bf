// A weight matrix as kernels see it: [rows, cols] in its storage dtype, y = x · Wᵀ (HF
// nn.Linear layout: one row per output feature).
//
// Layouts:
//   RowMajor  element (r, c) at r·cols + c (checkpoint order; what the reference backend uses)
//   Panel64   rows grouped in panels of 64 (zero-padded), each panel stored k-major:
//             element (r, c) at ((r / 64)·cols + c)·64 + r % 64. A matmul then streams one
//             contiguous panel per 64 outputs and every output reduces over k in order, which
//             makes decode a single sequential DRAM stream (2x the bandwidth of 8 row
//             streams on the CPUs we measured) and keeps every kernel bit-compatible.
//             bf16 panels interleave each group of 32 outputs: output g·32 + i sits at
//             g·32 + 2·(i % 16) + i / 16, so a vector of 16-bit pairs turns into f32 outputs
//             g·32 + [0, 16) with one shift and g·32 + [16, 32) with one mask (no widening
//             shuffle: the conversion costs 1 op per 16 weights instead of 2 per 8).
//   MmaFragments  (CUDA) bf16, rows padded to 128 and cols to 64 with zeros, stored as the B
//             operands of mma.m16n8k16: units of 8 rows x 32 cols, unit (r/8, c/32) at
//             ((r/8)·(cols64/32) + c/32)·256 elements; inside a unit, lane (r%8)·4 + (c%8)/2
//             holds 8 elements: for t = c%32/16 and h = c%16/8 the pair at (2t + h)·2 + c%2.
//             Each lane's fragment is one 16-byte load (see kernels/cuda/common.cuh).
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace tachyon::kernels {

using tachyon::DType;

enum class WeightLayout : uint8_t { RowMajor, Panel64, MmaFragments };

struct Weight {
  const void* data = nullptr;
  DType dtype = DType::F32;
  int64_t rows = 0;  // output features (or vocabulary entries for embeddings)
  int64_t cols = 0;  // input features (1-D weights: rows = 1)
  WeightLayout layout = WeightLayout::RowMajor;
  // I8 weights (a drafter's, Backend::upload_draft_weight): element (r, c) is data's int8 value
  // times scales[r] (one f32 per row; Panel64: per padded row).
  const float* scales = nullptr;
  bool empty() const { return data == nullptr; }

  static constexpr int64_t kPanel = 64;
  int64_t index_of(int64_t r, int64_t c) const {
    switch (layout) {
      case WeightLayout::RowMajor: return r * cols + c;
      case WeightLayout::Panel64: {
        const int64_t j = r % kPanel, slot = dtype == DType::BF16 ? j / 32 * 32 + 2 * (j % 16) + j % 32 / 16 : j;
        return ((r / kPanel) * cols + c) * kPanel + slot;
      }
      case WeightLayout::MmaFragments: {
        const int64_t kk = c % 32, t = kk / 16, kt = kk % 16, units_per_row = (cols + 63) / 64 * 2;
        const int64_t lane = (r % 8) * 4 + (kt % 8) / 2, reg = 2 * t + (kt >= 8 ? 1 : 0);
        return (((r / 8) * units_per_row + c / 32) * 32 + lane) * 8 + reg * 2 + kt % 2;
      }
    }
    return -1;
  }
};

}  // namespace tachyon::kernels
