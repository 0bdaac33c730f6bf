// Dequantizing copies of quantized weights (matmul_quant.cuh): bf16 MMA fragments or core
// matrices for the bf16 prefill GEMMs and the MoE grouped matmul, each element bf16_rn of its
// scalar value (the decode kernel's B registers exactly), and Int8Rows' column epilogue.
#include <cuda_bf16.h>

#include "kernels/cuda/matmul_quant.cuh"
#include "kernels/cuda/quant_common.cuh"

namespace tachyon::kernels::cuda {
namespace {

// One thread per (row tile, 16-byte code vector, lane): the lane's 2 or 4 units, each dequantized
// into the lane's B fragment exactly as the decode kernel does (quant_unit_fragment), stored as
// that unit's MMA fragment (one 16-byte store) or as its four 4-byte pieces of core-matrix rows
// (core (row / 8, k / 8) at ((row / 8) · kb_count + k / 8) · 128 bytes, row % 8 its 16-byte row).
// Reads and writes are coalesced per warp. With `only.ids`, a CTA whose expert no routed slot names
// writes nothing (a MoE decode step dequantizes its top-k experts, not all of them).
template <int kKind, bool kCore>
__global__ void dequantize_kernel(QuantMatrix w, int64_t vectors_per_tile, int64_t kp_count, int64_t threads,
                                  void* __restrict__ dst, ExpertFilter only) {
  pdl_enter();  // the routing's ids are the previous kernels' output
  if (only.ids) {
    bool used = false;
    for (int j = threadIdx.x; j < only.count; j += blockDim.x) used |= only.ids[j] == only.expert;
    if (!__syncthreads_or(used)) return;
  }
  constexpr int kUnitsPerVector = quant_kind_bits(kKind) == 8 ? 2 : 4;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= threads) return;
  const int lane = static_cast<int>(i % 32);
  const int64_t vector = (i / 32) % vectors_per_tile, tile = i / 32 / vectors_per_tile, row = tile * 8 + lane / 4;
  const uint4 v = __ldg(static_cast<const uint4*>(w.codes) + i);  // the layout's vector index is i
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
  const int group_shift = __ffsll(w.group) - 1;
#pragma unroll
  for (int u = 0; u < kUnitsPerVector; ++u) {
    const int64_t unit = vector * kUnitsPerVector + u;
    if (unit >= kp_count) break;
    uint32_t b[4];
    quant_unit_fragment<kKind>(w, words, u, unit, w.scale_base(row), group_shift, b);
    if constexpr (kCore) {
      const int64_t kb_count = kp_count * 4;
#pragma unroll
      for (int p = 0; p < 4; ++p)  // p = 2t + h: columns 32·unit + 8p + [0, 8), this lane's pair 2(lane % 4)
        static_cast<uint32_t*>(dst)[core_row_index(row, unit * 4 + p, kb_count) * 4 + lane % 4] = b[p];
    } else {
      static_cast<uint4*>(dst)[(tile * kp_count + unit) * 32 + lane] = make_uint4(b[0], b[1], b[2], b[3]);
    }
  }
}

template <bool kCore>
void dequantize(const QuantMatrix& w, void* dst, cudaStream_t stream, ExpertFilter only = {}) {
  const int64_t vectors_per_tile = w.vectors_per_tile(), threads = w.rows_padded() / 8 * vectors_per_tile * 32;
  with_quant_kind(w.kind, [&](auto kind) {
    launch(dequantize_kernel<decltype(kind)::value, kCore>, static_cast<unsigned>(ceil_div(threads, 256)), 256, 0,
           stream, w, vectors_per_tile, w.units_per_row_tile(), threads, dst, only);
  });
  TACHYON_CUDA_LAUNCH_CHECK();
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

void dequantize_to_fragments(const QuantMatrix& w, void* dst, cudaStream_t stream, ExpertFilter only) {
  dequantize<false>(w, dst, stream, only);
}

void dequantize_to_core(const QuantMatrix& w, void* dst, cudaStream_t stream) { dequantize<true>(w, dst, stream); }

void scale_quant_columns(float* out, int64_t rows, int64_t n, const float* row_scales, const float* bias,
                         cudaStream_t stream) {
  const int64_t total = rows * n;
  if (total == 0) return;
  launch(scale_columns_kernel, static_cast<unsigned>(ceil_div(total, 256)), 256, 0, stream, out, total, n, row_scales,
         bias);
  TACHYON_CUDA_LAUNCH_CHECK();
}

}  // namespace tachyon::kernels::cuda
