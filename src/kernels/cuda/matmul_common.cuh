// What the matmul kernels (matmul_decode.cu, matmul_prefill.cu, matmul_wgmma.cu) share: the A
// fragment loads, the split-K fix-up in the canonical segment order, the tile constants, and the
// wgmma kernel's entry for the dispatch (matmul.cu). Internal to src/kernels/cuda.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/core_tensor_map.h"
#include "kernels/cuda/matmul.cuh"
#include "kernels/cuda/mma.cuh"

namespace tachyon::kernels::cuda {

constexpr int kTileM = 8;       // m-tiles (16 rows) per CTA of the prefill kernels; A fragments pad M to it
constexpr int kStageKt = 4;     // k-tiles (16) per pipeline stage of the prefill kernels
constexpr int kStagesPerSegment = static_cast<int>(kSegmentK / (16 * kStageKt));
constexpr int kSplitWarps = 8;  // warps (n-tiles) per CTA of the split-K and batched decode kernels

inline int64_t a_fragment_m_tiles(int64_t rows) { return round_up(ceil_div(rows, 16), kTileM); }

// Internal linkage: each kernel file inlines its own copy.
namespace {

// The A fragment of m-tile rows [r0, r0 + 16) and k-tile columns [k0, k0 + 16).
__device__ __forceinline__ void load_a_fragment(const float* __restrict__ x, int M, int K, int r0, int k0, int lane,
                                                uint32_t (&a)[4]) {
  const int g = lane >> 2, c = lane & 3;
  a[0] = load_x_pair(x, M, K, r0 + g, k0 + 2 * c);
  a[1] = load_x_pair(x, M, K, r0 + g + 8, k0 + 2 * c);
  a[2] = load_x_pair(x, M, K, r0 + g, k0 + 2 * c + 8);
  a[3] = load_x_pair(x, M, K, r0 + g + 8, k0 + 2 * c + 8);
}

__device__ __forceinline__ float finish(float total, const float* __restrict__ bias, int col) {
  return total + (bias ? bias[col] : 0.f);
}

// Split-K fix-up, run by the last CTA of a column group (256 threads): each output's segment
// sums added in segment order (the canonical reduction, common.cuh), then the bias; the
// group's counter is re-armed for the next launch (stream-ordered).
template <int kGroupCols>
__device__ __forceinline__ void add_segment_sums(const float* partial, int M, int N, int n_pad,
                                                 int num_segments, const float* __restrict__ bias,
                                                 float* __restrict__ out, unsigned* counters) {
  for (int i = threadIdx.x; i < M * kGroupCols; i += 256) {
    const int row = i / kGroupCols, cc = blockIdx.x * kGroupCols + i % kGroupCols;
    if (cc >= N) continue;
    float total = 0.f;
    for (int s2 = 0; s2 < num_segments; ++s2) total += __ldcg(partial + (static_cast<int64_t>(s2) * M + row) * n_pad + cc);
    out[static_cast<int64_t>(row) * N + cc] = finish(total, bias, cc);
  }
  if (threadIdx.x == 0) counters[blockIdx.x] = 0u;
}

}  // namespace

// ---- matmul_wgmma.cu: M > 64 on sm_90a with the weight's core-matrix copy
// x [M, K] (or gated_activation's output, `in`) -> bf16 core matrices in `workspace`, then the
// wgmma kernel.
void matmul_wgmma(const MatmulInput& in, int M, int K, int k_tiles, const void* w_core, int64_t n, const float* bias,
                  float* out, void* workspace, cudaStream_t stream);

}  // namespace tachyon::kernels::cuda
