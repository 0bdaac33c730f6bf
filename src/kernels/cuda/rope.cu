#include "kernels/cuda/rope.cuh"

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/rowwise.cuh"

namespace tachyon::kernels::cuda {
namespace {

// Block (row, head), thread = rotated pair: no loop carries a load.
__global__ void rope_kernel(float* x, int heads, int head_dim, int offset, const float* __restrict__ inv_freq, int half,
                            float scaling, bool interleaved, const int32_t* __restrict__ positions) {
  pdl_enter();
  const int64_t row = blockIdx.x;
  const int h = blockIdx.y;
  const int i = threadIdx.x;  // rotated pair
  if (i >= half) return;
  const int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
  float* xh = x + (row * heads + h) * head_dim + offset;
  float x1 = xh[a], x2 = xh[b];
  rope_rotate(x1, x2, positions[row], inv_freq[i], scaling);
  xh[a] = x1;
  xh[b] = x2;
}

}  // namespace

void rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const float* inv_freq, int64_t rotary_dim,
          int64_t offset, float attention_scaling, bool interleaved, const int32_t* positions, cudaStream_t stream) {
  if (rows == 0 || rotary_dim < 2) return;
  const int half = static_cast<int>(rotary_dim / 2);
  if (half > 1024) fail_unsupported("rotary_dim", rotary_dim);
  if (heads > 65535) fail_unsupported("heads", heads);
  launch(rope_kernel, dim3(static_cast<unsigned>(rows), static_cast<unsigned>(heads)),
         static_cast<unsigned>(round_up(half, 32)), 0, stream, x,
         static_cast<int>(heads), static_cast<int>(head_dim), static_cast<int>(offset), inv_freq, half,
         attention_scaling, interleaved, positions);
}

}  // namespace tachyon::kernels::cuda
