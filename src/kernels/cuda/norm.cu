#include "kernels/cuda/norm.cuh"

#include "kernels/cuda/common.cuh"

namespace tachyon::kernels::cuda {
namespace {

__global__ void rms_norm_kernel(const float* x, const float* __restrict__ w, int64_t rows, int dim, float eps,
                                float weight_offset, float* out) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* xr = x + row * dim;
  float sum = 0.f;
  for (int i = lane; i < dim; i += 32) sum = fmaf(xr[i], xr[i], sum);
  sum = warp_sum(sum);
  const float inv = 1.f / sqrtf(sum / static_cast<float>(dim) + eps);
  float* orow = out + row * dim;  // may alias xr: each element is read before it is written
  for (int i = lane; i < dim; i += 32) orow[i] = (weight_offset + w[i]) * (xr[i] * inv);
}

// Wide rows (dim >= kWideDim): one 256-thread block per row; each thread sums its strided
// elements in order, then warps reduce by butterfly and warp sums add in warp order.
constexpr int kWideDim = 1024;
__global__ void rms_norm_wide_kernel(const float* x, const float* __restrict__ w, int dim, float eps,
                                     float weight_offset, float* out) {
  __shared__ float warp_sums[8];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  float sum = 0.f;
  for (int i = threadIdx.x; i < dim; i += 256) sum = fmaf(xr[i], xr[i], sum);
  sum = warp_sum(sum);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  float total = 0.f;
  for (int i = 0; i < 8; ++i) total += warp_sums[i];
  const float inv = 1.f / sqrtf(total / static_cast<float>(dim) + eps);
  float* orow = out + static_cast<int64_t>(blockIdx.x) * dim;
  for (int i = threadIdx.x; i < dim; i += 256) orow[i] = (weight_offset + w[i]) * (xr[i] * inv);
}

}  // namespace

void rms_norm(const float* x, const float* w, int64_t rows, int64_t dim, float eps, float weight_offset, float* out,
              cudaStream_t stream) {
  if (rows == 0) return;
  if (dim >= kWideDim) {
    rms_norm_wide_kernel<<<static_cast<unsigned>(rows), 256, 0, stream>>>(x, w, static_cast<int>(dim), eps,
                                                                          weight_offset, out);
    TACHYON_CUDA_LAUNCH_CHECK();
    return;
  }
  constexpr int kRowsPerBlock = 8;
  rms_norm_kernel<<<static_cast<unsigned>(ceil_div(rows, kRowsPerBlock)), 32 * kRowsPerBlock, 0, stream>>>(
      x, w, rows, static_cast<int>(dim), eps, weight_offset, out);
  TACHYON_CUDA_LAUNCH_CHECK();
}

}  // namespace tachyon::kernels::cuda
