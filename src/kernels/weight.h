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
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace tachyon::kernels {

using tachyon::DType;

enum class WeightLayout : uint8_t { RowMajor, Panel64 };

struct Weight {
  const void* data = nullptr;
  DType dtype = DType::F32;
  int64_t rows = 0;  // output features (or vocabulary entries for embeddings)
  int64_t cols = 0;  // input features (1-D weights: rows = 1)
  WeightLayout layout = WeightLayout::RowMajor;
  bool empty() const { return data == nullptr; }

  static constexpr int64_t kPanel = 64;
  int64_t index_of(int64_t r, int64_t c) const {
    return layout == WeightLayout::RowMajor ? r * cols + c : ((r / kPanel) * cols + c) * kPanel + r % kPanel;
  }
};

}  // namespace tachyon::kernels
