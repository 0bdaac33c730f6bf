// MoE router logits in f32: logits = x·Wᵀ + b from the f32 activations and an f32 row-major
// weight (Backend::router_logits). The matmul kernels round their inputs to bf16; a router's
// logits decide discrete expert choices, which that rounding flips where two experts nearly tie.
// One warp per (row, expert): each lane sums a strided slice of the k columns with fma, then the
// warp adds the 32 partial sums in a fixed tree. A row's logits depend on that row alone.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tachyon::kernels::cuda {

// logits [rows, experts] = x [rows, hidden] · w [experts, hidden]ᵀ (+ bias [experts] when not
// null); all device arrays, f32, row-major.
void router_logits(const float* x, int64_t rows, const float* w, const float* bias, int64_t experts, int64_t hidden,
                   float* logits, cudaStream_t stream);

}  // namespace tachyon::kernels::cuda
