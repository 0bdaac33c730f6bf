// Matmul, embedding and dequantizing copies of quantized weights on the device (layout and
// arithmetic: quant_layout.h). The backend (quant_weights.cpp) dispatches:
//  - 1-8 rows on Hopper: matmul_quant_stream (below), where it takes the shape;
//  - 1-64 rows otherwise: matmul_quant_decode, split-K like the bf16 split-K kernel (matmul_decode.cu): one
//    warp per (8 output columns, 512-k segment) loads its segment's packed codes (4 or 8 16-byte
//    loads per lane, before waiting for the previous kernel), dequantizes them in registers into
//    bf16 B fragments and runs the segment's m16n8k16 chain; the last CTA of a column group adds
//    the segment sums in order. The canonical order of common.cuh, so a row's bits equal those
//    of the bf16 kernels on the dequantized matrix, whatever the batch;
//  - more rows: dequantize_to_fragments / dequantize_to_core into a bf16 scratch copy, then the
//    bf16 prefill GEMM (mma.sync or wgmma): the same bits again.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/quant_layout.h"

namespace tachyon::kernels::cuda {

// out [rows, n] = x [rows, k] · Wᵀ (+ bias), 1 <= rows <= 64. partial: the split-K workspace
// (matmul_workspace_bytes(rows, n, k) bytes suffice); counters: matmul_counter_count(n) zeroed
// unsigned ints, left zeroed.
void matmul_quant_decode(const float* x, int64_t rows, const QuantMatrix& w, const float* bias, float* out,
                         void* partial, unsigned* counters, cudaStream_t stream);

// The streaming decode matmul (matmul_quant_stream.cu): out [rows, n] = x · Wᵀ (+ bias) at 1-8
// rows on Hopper, the bf16 streaming kernel's ring (stream_ring.cuh) carrying codes and scales,
// with the split-K kernel's bits. quant_stream_takes: whether it takes w at `rows` (Hopper, x whole
// beside the ring, groups of 16-512 columns, 16-byte aligned buffers, the lab switch below on).
bool quant_stream_takes(const QuantMatrix& w, int64_t rows);
void matmul_quant_stream(const float* x, int64_t rows, const QuantMatrix& w, const float* bias, float* out,
                         cudaStream_t stream);
// Kernel lab and tests: off, 1-8 rows take the split-K kernel too (on by default; the same bits).
void set_quant_decode_stream(bool on);

// Kernel lab (bench/cuda/quant_bench.cpp): 512-k segments per warp of the decode kernel at up to 8
// rows (1, 2 or 4, 8-bit codes at most 2; 0: the default, 2 for 8-bit codes and 4 for 4-bit). Every
// choice gives the same bits.
void set_quant_decode_segments(int segments);

// Restricts a MoE expert's dequantizing copy to calls whose routing names it: ids [count] (device
// memory, the routing's output) are read on the device; none equal to `expert`: nothing is written.
struct ExpertFilter {
  const int32_t* ids = nullptr;  // null: no restriction
  int32_t count = 0;
  int32_t expert = 0;
};
// w as bf16 MMA fragments (packed_weight_bytes(w.rows, w.cols) bytes at dst; Int8Rows: the codes,
// its row scales left out).
void dequantize_to_fragments(const QuantMatrix& w, void* dst, cudaStream_t stream, ExpertFilter only = {});
// w as bf16 core matrices, the wgmma prefill kernel's order (core_weight_bytes bytes at dst).
void dequantize_to_core(const QuantMatrix& w, void* dst, cudaStream_t stream);
// Int8Rows after a bf16 matmul of its codes: out[r, c] = out[r, c] · row_scales[c] (+ bias[c]),
// the decode kernel's epilogue arithmetic.
void scale_quant_columns(float* out, int64_t rows, int64_t n, const float* row_scales, const float* bias,
                         cudaStream_t stream);

// out[r, :] = W[ids[r], :] · scale in f32 (the scalar definition; Int8Rows with its row scale).
// An id outside [0, w.rows) reads row 0 (Backend::embedding_device_ids).
void embedding_quant(const QuantMatrix& w, const int32_t* ids, int64_t rows, float scale, float* out,
                     cudaStream_t stream);

}  // namespace tachyon::kernels::cuda
