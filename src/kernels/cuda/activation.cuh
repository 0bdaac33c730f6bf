// The gated activation's per-element arithmetic, shared by the activation kernel (elementwise.cu)
// and the matmuls that apply it while staging their input (Backend::gated_matmul), so the fused
// path computes the same bits by construction.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mma.cuh"

namespace tachyon::kernels::cuda {

#ifdef __CUDACC__
__device__ __forceinline__ float silu(float x) { return x / (1.f + expf(-x)); }
__device__ __forceinline__ float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x)));
}
// act(gate) · up, one element.
__device__ __forceinline__ float gated(float gate, float up, bool gelu) {
  return (gelu ? gelu_tanh(gate) : silu(gate)) * up;
}

// A matmul's input row r, columns k, k + 1 as a bf16 pair (the matmul input rounding), zero outside
// [M, K) (K even): x itself, or, when gate_up is set, gated_activation's output computed from it
// (gate_up [M, 2K]: the gate columns, then the up columns).
// No padding bytes: kernel parameters are compared bytewise as graph keys (step_graph.h).
struct MatmulInput {
  const float* x = nullptr;
  const float* gate_up = nullptr;
  int32_t gelu = 0;  // GeluTanh, else SiLU
  int32_t unused = 0;
};
__device__ __forceinline__ uint32_t load_input_pair(const MatmulInput& in, int M, int K, int r, int k) {
  if (!in.gate_up) return load_x_pair(in.x, M, K, r, k);
  if (r >= M || k >= K) return 0u;
  const float* row = in.gate_up + static_cast<int64_t>(r) * 2 * K;
  const float2 g = *reinterpret_cast<const float2*>(row + k), u = *reinterpret_cast<const float2*>(row + K + k);
  return pack_bf16x2(gated(g.x, u.x, in.gelu), gated(g.y, u.y, in.gelu));
}
#endif

}  // namespace tachyon::kernels::cuda
