// Embedding rows of a quantized table (matmul_quant.cuh): tied embeddings whose table is the
// quantized LM head. Each element is the f32 scalar definition (quant_common.cuh), times the scale.
#include "kernels/cuda/matmul_quant.cuh"
#include "kernels/cuda/quant_common.cuh"

namespace tachyon::kernels::cuda {
namespace {

template <int kKind>
__global__ void embedding_quant_kernel(QuantMatrix w, const int32_t* __restrict__ ids, float scale,
                                       float* __restrict__ out) {
  pdl_enter();
  const int64_t r = blockIdx.x, given = ids[r], id = given >= 0 && given < w.rows ? given : 0;
  const float row_scale = kKind == kQuantInt8Rows ? w.row_scales[id] : 1.f;
  for (int64_t c = threadIdx.x; c < w.cols; c += blockDim.x) {
    float v = quant_element<kKind>(w, id, c);
    if constexpr (kKind == kQuantInt8Rows) v = __fmul_rn(v, row_scale);
    out[r * w.cols + c] = __fmul_rn(v, scale);
  }
}

}  // namespace

void embedding_quant(const QuantMatrix& w, const int32_t* ids, int64_t rows, float scale, float* out,
                     cudaStream_t stream) {
  if (rows == 0) return;
  with_quant_kind(w.kind, [&](auto kind) {
    launch(embedding_quant_kernel<decltype(kind)::value>, static_cast<unsigned>(rows), 256, 0, stream, w, ids, scale,
           out);
  });
  TACHYON_CUDA_LAUNCH_CHECK();
}

}  // namespace tachyon::kernels::cuda
