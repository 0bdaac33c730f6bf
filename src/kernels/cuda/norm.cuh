// RMSNorm: out = x / sqrt(mean(x²) + eps) * (weight_offset + w), one warp per row (one block
// per row from 1024 wide, every load issued before the first FMA); each lane sums its
// elements in a fixed order, then a fixed butterfly: a row's bits do not depend on the batch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tachyon::kernels::cuda {

// w: [dim] f32 (device).
void rms_norm(const float* x, const float* w, int64_t rows, int64_t dim, float eps, float weight_offset, float* out,
              cudaStream_t stream);
// x += y, then out = rms_norm(x), in one kernel (bit-identical to add then rms_norm) when the row
// has at most 1024 elements, or is wider and 16-byte aligned; returns false, having done
// nothing, otherwise.
bool add_rms_norm(float* x, const float* y, const float* w, int64_t rows, int64_t dim, float eps, float weight_offset,
                  float* out, cudaStream_t stream);
// Whether add_rms_norm takes the wide path (one 256-thread block per row, rowwise.cuh's order),
// whose bits the streaming matmul's fused norm reproduces.
bool add_rms_norm_is_wide(const float* x, const float* y, const float* w, int64_t dim, const float* out);
// add_rms_norm's wide path that also writes out's rows as a prefill matmul's input (`core`: bf16 in
// core-matrix order, m_pad rows, the last m_pad - rows zero; matmul.cuh's matmul_core_input), the
// rounding the matmul would apply to out: one pass over the rows instead of the matmul's own
// conversion. Only where add_rms_norm_writes_core (the wide path, dim % 64 == 0).
bool add_rms_norm_writes_core(const float* x, const float* y, const float* w, int64_t dim, const float* out);
void add_rms_norm_core(float* x, const float* y, const float* w, int64_t rows, int64_t dim, float eps,
                       float weight_offset, float* out, void* core, int64_t m_pad, cudaStream_t stream);

}  // namespace tachyon::kernels::cuda
