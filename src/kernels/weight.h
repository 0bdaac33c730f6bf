// A weight matrix as kernels see it: a row-major [rows, cols] view in its storage dtype.
// Matmuls compute y = x · Wᵀ (HF nn.Linear layout: one row per output feature).
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace tachyon::kernels {

using tachyon::DType;

struct Weight {
  const void* data = nullptr;
  DType dtype = DType::F32;
  int64_t rows = 0;  // output features (or vocabulary entries for embeddings)
  int64_t cols = 0;  // input features
  bool empty() const { return data == nullptr; }
};

}  // namespace tachyon::kernels
