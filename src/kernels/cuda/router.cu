#include "kernels/cuda/common.cuh"
#include "kernels/cuda/router.cuh"

namespace tachyon::kernels::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;  // experts per CTA; grid.y covers the rest

// Lane l sums columns l, l + 32, ... (float4 groups of them where rows are 16-byte aligned).
__global__ void router_logits_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                     const float* __restrict__ bias, int64_t experts, int64_t hidden, bool vec4,
                                     float* __restrict__ logits) {
  pdl_enter();
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t row = blockIdx.x;
  const int64_t expert = static_cast<int64_t>(blockIdx.y) * kWarpsPerBlock + threadIdx.x / 32;
  if (expert >= experts) return;
  const float* xr = x + row * hidden;
  const float* we = w + expert * hidden;
  float acc = 0.f;
  if (vec4) {
    const auto* x4 = reinterpret_cast<const float4*>(xr);
    const auto* w4 = reinterpret_cast<const float4*>(we);
    for (int64_t i = lane; i < hidden / 4; i += 32) {
      const float4 a = x4[i], b = w4[i];
      acc = fmaf(a.x, b.x, acc);
      acc = fmaf(a.y, b.y, acc);
      acc = fmaf(a.z, b.z, acc);
      acc = fmaf(a.w, b.w, acc);
    }
  } else {
    for (int64_t c = lane; c < hidden; c += 32) acc = fmaf(xr[c], we[c], acc);
  }
  for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
  if (lane == 0) logits[row * experts + expert] = bias ? acc + bias[expert] : acc;
}

}  // namespace

void router_logits(const float* x, int64_t rows, const float* w, const float* bias, int64_t experts, int64_t hidden,
                   float* logits, cudaStream_t stream) {
  if (rows == 0 || experts == 0) return;
  const bool vec4 = hidden % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(w) % 16 == 0;
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(ceil_div(experts, kWarpsPerBlock)));
  launch(router_logits_kernel, grid, dim3(32 * kWarpsPerBlock), 0, stream, x, w, bias, experts, hidden, vec4, logits);
}

}  // namespace tachyon::kernels::cuda
