// Weight packing for the matmul kernels: row-major f32/f16/bf16 matrices into bf16 MMA fragments
// (every kernel) and into wgmma core-matrix order (the sm_90a prefill kernel's second copy).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"

namespace tachyon::kernels::cuda {

// Bytes of the fragment-packed copy of a [rows, cols] matrix.
size_t packed_weight_bytes(int64_t rows, int64_t cols);
// Packs a row-major matrix `src` (device memory, f32/f16/bf16) into `dst` (bf16 fragments).
void pack_weight(const void* src, DType dtype, int64_t rows, int64_t cols, void* dst, cudaStream_t stream);

// The same matrix in wgmma core-matrix order, for the prefill kernel (M > 64) on sm_90a: core
// matrices of 8 rows x 8 columns (16 bytes per row), core (r / 8, c / 8) at
// ((r / 8) · cols64 / 8 + c / 8) · 128 bytes, rows padded to 128 and columns to 64 with zeros.
size_t core_weight_bytes(int64_t rows, int64_t cols);
void pack_core_weight(const void* src, DType dtype, int64_t rows, int64_t cols, void* dst, cudaStream_t stream);

}  // namespace tachyon::kernels::cuda
