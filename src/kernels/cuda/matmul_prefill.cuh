// The mma.sync prefill matmul (M > 64, matmul_prefill.cu), as the dispatch (matmul.cu) calls it.
#pragma once

#include "kernels/cuda/matmul_common.cuh"

namespace tachyon::kernels::cuda {

// x [M, K] f32 -> A fragments [m_tiles][k_tiles][32 lanes] x uint4, zero-padded.
void to_a_fragments(const float* x, int M, int K, int64_t m_tiles, int k_tiles, uint4* xa, cudaStream_t stream);
// The tiled kernel (128 x 128 tiles, a 4-stage cp.async pipeline) on A fragments.
void matmul_tiled(const uint4* xa, int M, int64_t m_tiles, int k_tiles, const uint4* w, int N, const float* bias,
                  float* out, cudaStream_t stream);

}  // namespace tachyon::kernels::cuda
