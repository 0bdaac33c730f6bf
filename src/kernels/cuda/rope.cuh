// Rotary embedding in place on x [rows, heads, head_dim] (dims [offset, offset + rotary_dim)
// of each head), per-row positions (device), the
// table's inverse frequencies on the device. cos/sin are computed per (row, pair) in f32
// exactly as the reference does (position · inv_freq, then cosf/sinf, times the scaling).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tachyon::kernels::cuda {

void rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const float* inv_freq, int64_t rotary_dim,
          int64_t offset, float attention_scaling, bool interleaved, const int32_t* positions, cudaStream_t stream);

}  // namespace tachyon::kernels::cuda
