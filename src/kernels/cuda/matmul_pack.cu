#include "kernels/cuda/matmul_pack.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/common.cuh"

namespace tachyon::kernels::cuda {
namespace {

// Element (n, k) of a row-major [rows, cols] f32/f16/bf16 matrix as bf16 bits; zero outside it.
__device__ __forceinline__ uint16_t source_bf16(const void* __restrict__ src, int dtype, int64_t rows, int64_t cols,
                                                int64_t n, int64_t k) {
  float f = 0.f;
  if (n < rows && k < cols) {
    const int64_t idx = n * cols + k;
    if (dtype == static_cast<int>(DType::F32)) f = static_cast<const float*>(src)[idx];
    else if (dtype == static_cast<int>(DType::F16)) f = __half2float(static_cast<const __half*>(src)[idx]);
    else f = __bfloat162float(static_cast<const __nv_bfloat16*>(src)[idx]);
  }
  const __nv_bfloat16 b = __float2bfloat16_rn(f);
  return *reinterpret_cast<const uint16_t*>(&b);
}

__global__ void pack_weight_kernel(const void* __restrict__ src, int dtype, int64_t rows, int64_t cols,
                                   int64_t num_units, int64_t kp_count, uint4* __restrict__ dst) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= num_units * 32) return;
  const int lane = static_cast<int>(i % 32);
  const int64_t unit = i / 32, nt = unit / kp_count, kp = unit % kp_count;
  const int64_t n = nt * 8 + lane / 4;
  uint16_t v[8];
  for (int j = 0; j < 4; ++j)
    for (int h = 0; h < 2; ++h) {
      const int64_t k = kp * 32 + 16 * (j >> 1) + 2 * (lane & 3) + 8 * (j & 1) + h;
      v[j * 2 + h] = source_bf16(src, dtype, rows, cols, n, k);
    }
  dst[i] = *reinterpret_cast<const uint4*>(v);
}

// Core-matrix copy of a row-major [rows, cols] matrix (pack_core_weight): one thread per core
// matrix row (8 bf16 = 16 bytes); core (n / 8, k / 8) at ((n / 8) · kb_count + k / 8) · 128 bytes.
__global__ void pack_core_kernel(const void* __restrict__ src, int dtype, int64_t rows, int64_t cols,
                                 int64_t kb_count, int64_t units, uint4* __restrict__ dst) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= units) return;
  const int64_t core = i / 8, n = (core / kb_count) * 8 + i % 8, k0 = (core % kb_count) * 8;
  uint16_t v[8];
  for (int j = 0; j < 8; ++j) v[j] = source_bf16(src, dtype, rows, cols, n, k0 + j);
  dst[i] = *reinterpret_cast<const uint4*>(v);
}

}  // namespace

size_t packed_weight_bytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>(round_up(rows, kMmaRowPad) * round_up(cols, kMmaColPad)) * 2;
}

size_t core_weight_bytes(int64_t rows, int64_t cols) { return packed_weight_bytes(rows, cols); }

void pack_core_weight(const void* src, DType dtype, int64_t rows, int64_t cols, void* dst, cudaStream_t stream) {
  const int64_t kb_count = round_up(cols, kMmaColPad) / 8, units = round_up(rows, kMmaRowPad) * kb_count;
  pack_core_kernel<<<static_cast<unsigned>(ceil_div(units, 256)), 256, 0, stream>>>(
      src, static_cast<int>(dtype), rows, cols, kb_count, units, static_cast<uint4*>(dst));
  TACHYON_CUDA_LAUNCH_CHECK();
}

void pack_weight(const void* src, DType dtype, int64_t rows, int64_t cols, void* dst, cudaStream_t stream) {
  const int64_t kp_count = round_up(cols, kMmaColPad) / 32, num_units = round_up(rows, kMmaRowPad) / 8 * kp_count;
  const int64_t threads = num_units * 32;
  pack_weight_kernel<<<static_cast<unsigned>(ceil_div(threads, 256)), 256, 0, stream>>>(
      src, static_cast<int>(dtype), rows, cols, num_units, kp_count, static_cast<uint4*>(dst));
  TACHYON_CUDA_LAUNCH_CHECK();
}

}  // namespace tachyon::kernels::cuda
