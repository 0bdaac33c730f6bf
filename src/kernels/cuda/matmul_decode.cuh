// The decode matmul kernels (M <= 64, matmul_decode.cu), as the dispatch (matmul.cu) calls them.
#pragma once

#include "kernels/cuda/matmul_common.cuh"

namespace tachyon::kernels::cuda {

// The kernels that read x as f32 (split-K at M <= 64; the skinny and staged kernels at M <= 16):
// false, with nothing launched, where `variant` at M rows takes A fragments instead.
bool matmul_decode_from_x(int variant, bool splitk_smem_weights, const float* x, int M, int K, const uint4* w, int N,
                          int kp_count, const float* bias, float* out, float* partial, unsigned* counters,
                          cudaStream_t stream);
// 17-64 rows on x's A fragments xa (to_a_fragments): the batched or the skinny kernel.
void matmul_decode_from_fragments(int variant, const float* x, const uint4* xa, int M, int K, int k_tiles,
                                  const uint4* w, int N, const float* bias, float* out, float* partial,
                                  unsigned* counters, cudaStream_t stream);

}  // namespace tachyon::kernels::cuda
