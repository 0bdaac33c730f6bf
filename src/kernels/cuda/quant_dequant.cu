// Dequantizing copies of quantized weights (matmul_quant.cuh): bf16 MMA fragments or core
// matrices for the bf16 prefill GEMMs and the MoE grouped matmul, each element bf16_rn of
// quant_element (the decode kernel's B registers exactly), and Int8Rows' column epilogue.
#include <cuda_bf16.h>

#include "kernels/cuda/matmul_quant.cuh"
#include "kernels/cuda/quant_common.cuh"

namespace tachyon::kernels::cuda {
namespace {

template <int kKind>
__device__ __forceinline__ uint16_t element_bf16(const QuantMatrix& w, int64_t n, int64_t k) {
  const __nv_bfloat16 b = __float2bfloat16_rn(quant_element<kKind>(w, n, k));
  return *reinterpret_cast<const uint16_t*>(&b);
}

// One thread per (unit of 8 rows x 32 columns, lane), pack_weight_kernel's order (matmul_pack.cu).
template <int kKind>
__global__ void dequantize_fragments_kernel(QuantMatrix w, int64_t num_units, int64_t kp_count, uint4* __restrict__ dst) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= num_units * 32) return;
  const int lane = static_cast<int>(i % 32);
  const int64_t unit = i / 32, nt = unit / kp_count, kp = unit % kp_count;
  const int64_t n = nt * 8 + lane / 4;
  uint16_t v[8];
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t k = kp * 32 + 16 * (j >> 1) + 2 * (lane & 3) + 8 * (j & 1) + h;
      v[j * 2 + h] = element_bf16<kKind>(w, n, k);
    }
  dst[i] = *reinterpret_cast<const uint4*>(v);
}

// One thread per core-matrix row (8 bf16), pack_core_kernel's order.
template <int kKind>
__global__ void dequantize_core_kernel(QuantMatrix w, int64_t kb_count, int64_t units, uint4* __restrict__ dst) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= units) return;
  const int64_t core = i / 8, n = (core / kb_count) * 8 + i % 8, k0 = (core % kb_count) * 8;
  uint16_t v[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = element_bf16<kKind>(w, n, k0 + j);
  dst[i] = *reinterpret_cast<const uint4*>(v);
}

__global__ void scale_columns_kernel(float* __restrict__ out, int64_t total, int64_t n,
                                     const float* __restrict__ row_scales, const float* __restrict__ bias) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t c = i % n;
  out[i] = __fmul_rn(out[i], row_scales[c]) + (bias ? bias[c] : 0.f);
}

}  // namespace

void dequantize_to_fragments(const QuantMatrix& w, void* dst, cudaStream_t stream) {
  const int64_t kp_count = w.units_per_row_tile(), num_units = w.rows_padded() / 8 * kp_count;
  with_quant_kind(w.kind, [&](auto kind) {
    launch(dequantize_fragments_kernel<decltype(kind)::value>, static_cast<unsigned>(ceil_div(num_units * 32, 256)),
           256, 0, stream, w, num_units, kp_count, static_cast<uint4*>(dst));
  });
  TACHYON_CUDA_LAUNCH_CHECK();
}

void dequantize_to_core(const QuantMatrix& w, void* dst, cudaStream_t stream) {
  const int64_t kb_count = w.cols_padded() / 8, units = w.rows_padded() * kb_count;
  with_quant_kind(w.kind, [&](auto kind) {
    launch(dequantize_core_kernel<decltype(kind)::value>, static_cast<unsigned>(ceil_div(units, 256)), 256, 0, stream,
           w, kb_count, units, static_cast<uint4*>(dst));
  });
  TACHYON_CUDA_LAUNCH_CHECK();
}

void scale_quant_columns(float* out, int64_t rows, int64_t n, const float* row_scales, const float* bias,
                         cudaStream_t stream) {
  const int64_t total = rows * n;
  if (total == 0) return;
  launch(scale_columns_kernel, static_cast<unsigned>(ceil_div(total, 256)), 256, 0, stream, out, total, n, row_scales,
         bias);
  TACHYON_CUDA_LAUNCH_CHECK();
}

}  // namespace tachyon::kernels::cuda
