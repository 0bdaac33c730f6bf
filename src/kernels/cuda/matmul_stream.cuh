// The streaming decode matmul (M <= 8): one long-lived CTA per SM streams a contiguous run of
// the weight's n-tiles through a ring in shared memory filled by bulk copies (TMA), so every SM
// keeps up to kStreamSlots x 8 KB of weights in flight from its first cycle to its last, with no
// per-CTA ramp or tail between batches, and starts streaming before the previous kernel ends.
// Same canonical order as every matmul kernel (common.cuh): one MMA chain per (n-tile, segment),
// the segment sums added in segment order.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tachyon::kernels::cuda {

constexpr int kStreamMaxRows = 8;

// Whether x [rows, k] fits beside the ring (x is held in shared memory as bf16).
bool stream_matmul_fits(int64_t rows, int64_t k);

// out [M, N] = x [M, K] · Wᵀ (+ bias); w fragment-packed with kp_count k-pairs per n-tile.
void matmul_stream(const float* x, int M, int K, const uint4* w, int N, int kp_count, const float* bias, float* out,
                   cudaStream_t stream);

}  // namespace tachyon::kernels::cuda
