// Row-local ops with no reduction: embedding gather, gated activation, residual add, row
// gather, strided copies, gating. Each output element is a function of its own inputs only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/ops.h"

namespace tachyon::kernels::cuda {

// out[r, :] = table[ids[r], :] * scale; table bf16 fragment-packed [vocab, dim] or f32 row-major.
// An id outside [0, vocab) reads row 0 (Backend::embedding_device_ids).
void embedding(const void* table, bool fragment_packed, int64_t vocab, int64_t dim, const int32_t* ids, int64_t rows,
               float scale, float* out, cudaStream_t stream);
// out[r, i] = act(gate_up[r, i]) * gate_up[r, dim + i]
void gated_activation(const float* gate_up, int64_t rows, int64_t dim, Activation act, float* out,
                      cudaStream_t stream);
// x += y
void add(float* x, const float* y, int64_t n, cudaStream_t stream);
// dst[i, :] = src[rows[i], :]
// ids[r] = the first index of the maximum of x[r, 0:n).
void argmax(const float* x, int64_t rows, int64_t n, int32_t* ids, cudaStream_t stream);
// out[r] = the TopTwo of x[r, 0:n) (kernels/ops.h): indices exact; probabilities from float
// exponentials summed in double, within rounding of Backend::top_two's host definition.
void top_two(const float* x, int64_t rows, int64_t n, TopTwo* out, cudaStream_t stream);
void gather_rows(const float* src, const int32_t* rows, int64_t n, int64_t width, float* dst, cudaStream_t stream);
// dst[r, 0:width] = src[r, 0:width] with row strides
void copy_strided(const float* src, int64_t src_stride, int64_t rows, int64_t width, float* dst, int64_t dst_stride,
                  cudaStream_t stream);
// Backend::copy_on_device_many, 4-byte aligned: every source gathered into `workspace` (at
// `offset`, in words: a multiple of 4, so 16-byte copies stay 16-byte ones), then scattered to
// the destinations (two launches in all).
struct CopyDesc {
  uint32_t* dst;
  const uint32_t* src;
  int64_t offset, count;  // 4-byte words
};
void copy_many(const CopyDesc* copies, int64_t num_copies, uint32_t* workspace, cudaStream_t stream);
// x[r, i] *= fn(gate[r * gate_stride + i / group])
void gate_multiply(float* x, int64_t rows, int64_t dim, const float* gate, int64_t gate_stride, int64_t group,
                   GateFn fn, cudaStream_t stream);

}  // namespace tachyon::kernels::cuda
