// RMSNorm: out = x / sqrt(mean(x²) + eps) * (weight_offset + w), one warp per row (one block
// per row from 1024 wide); each lane sums its strided elements in order, then a fixed
// butterfly: a row's bits do not depend on the batch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tachyon::kernels::cuda {

// w: [dim] f32 (device).
void rms_norm(const float* x, const float* w, int64_t rows, int64_t dim, float eps, float weight_offset, float* out,
              cudaStream_t stream);

}  // namespace tachyon::kernels::cuda
