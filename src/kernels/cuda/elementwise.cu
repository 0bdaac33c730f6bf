#include "kernels/cuda/elementwise.cuh"

#include "kernels/cuda/common.cuh"

namespace tachyon::kernels::cuda {
namespace {

__global__ void embedding_kernel(const void* __restrict__ table, bool packed, int64_t dim,
                                 const int32_t* __restrict__ ids, float scale, float* __restrict__ out) {
  const int64_t r = blockIdx.x, id = ids[r];
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    const float v = packed ? __bfloat162float(static_cast<const __nv_bfloat16*>(table)[mma_fragment_index(id, c, dim)])
                           : static_cast<const float*>(table)[id * dim + c];
    out[r * dim + c] = v * scale;
  }
}

__device__ __forceinline__ float silu(float x) { return x / (1.f + expf(-x)); }
__device__ __forceinline__ float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x)));
}

__global__ void gated_activation_kernel(const float* __restrict__ gate_up, int64_t rows, int64_t dim, bool gelu,
                                        float* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * dim) return;
  const int64_t r = i / dim, c = i % dim;
  const float g = gate_up[r * 2 * dim + c];
  out[i] = (gelu ? gelu_tanh(g) : silu(g)) * gate_up[r * 2 * dim + dim + c];
}

__global__ void add_kernel(float* __restrict__ x, const float* __restrict__ y, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += y[i];
}

__global__ void gather_rows_kernel(const float* __restrict__ src, const int32_t* __restrict__ rows, int64_t width,
                                   float* __restrict__ dst) {
  const int64_t i = blockIdx.x, from = rows[i];
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) dst[i * width + c] = src[from * width + c];
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>(ceil_div(n, 256)); }

}  // namespace

void embedding(const void* table, bool fragment_packed, int64_t dim, const int32_t* ids, int64_t rows, float scale,
               float* out, cudaStream_t stream) {
  if (rows == 0) return;
  embedding_kernel<<<static_cast<unsigned>(rows), 256, 0, stream>>>(table, fragment_packed, dim, ids, scale, out);
  TACHYON_CUDA_LAUNCH_CHECK();
}

void gated_activation(const float* gate_up, int64_t rows, int64_t dim, Activation act, float* out,
                      cudaStream_t stream) {
  if (rows * dim == 0) return;
  gated_activation_kernel<<<blocks_for(rows * dim), 256, 0, stream>>>(gate_up, rows, dim, act == Activation::GeluTanh,
                                                                      out);
  TACHYON_CUDA_LAUNCH_CHECK();
}

void add(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  add_kernel<<<blocks_for(n), 256, 0, stream>>>(x, y, n);
  TACHYON_CUDA_LAUNCH_CHECK();
}

void gather_rows(const float* src, const int32_t* rows, int64_t n, int64_t width, float* dst, cudaStream_t stream) {
  if (n == 0) return;
  gather_rows_kernel<<<static_cast<unsigned>(n), 256, 0, stream>>>(src, rows, width, dst);
  TACHYON_CUDA_LAUNCH_CHECK();
}

}  // namespace tachyon::kernels::cuda
