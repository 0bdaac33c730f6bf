#include "kernels/cuda/norm.cuh"

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/rowwise.cuh"

namespace tachyon::kernels::cuda {
namespace {

// Up to 32 elements per lane: every load of a row is issued before the first FMA (a
// strided loop with a runtime trip count would wait on one load per iteration).
constexpr int kWarpMaxPerLane = 32;
__global__ void rms_norm_kernel(const float* x, const float* __restrict__ w, int64_t rows, int dim, float eps,
                                float weight_offset, float* out) {
  pdl_enter();
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* xr = x + row * dim;
  float v[kWarpMaxPerLane];
#pragma unroll
  for (int j = 0; j < kWarpMaxPerLane; ++j) v[j] = lane + 32 * j < dim ? xr[lane + 32 * j] : 0.f;
  const float inv = inv_rms(warp_sum_squares(v), dim, eps);
  float* orow = out + row * dim;  // may alias xr: every element was read above
#pragma unroll
  for (int j = 0; j < kWarpMaxPerLane; ++j)
    if (lane + 32 * j < dim) orow[lane + 32 * j] = rms_scaled(v[j], inv, w[lane + 32 * j], weight_offset);
}

// add_rms_norm for rows of up to 32 · kWarpMaxPerLane: x += y, out = norm(x), as the add and
// rms_norm kernels would in turn (the same sums, the same order) but in one launch: a small
// model's decode step is a chain of launch-bound kernels (the demo model: 12 per layer, of which
// these were 4).
__global__ void add_rms_norm_kernel(float* x, const float* y, const float* __restrict__ w, int64_t rows, int dim,
                                    float eps, float weight_offset, float* out) {
  pdl_enter();
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  float* xr = x + row * dim;
  const float* yr = y + row * dim;
  float v[kWarpMaxPerLane];
#pragma unroll
  for (int j = 0; j < kWarpMaxPerLane; ++j) v[j] = lane + 32 * j < dim ? xr[lane + 32 * j] + yr[lane + 32 * j] : 0.f;
#pragma unroll
  for (int j = 0; j < kWarpMaxPerLane; ++j)
    if (lane + 32 * j < dim) xr[lane + 32 * j] = v[j];
  const float inv = inv_rms(warp_sum_squares(v), dim, eps);
  float* orow = out + row * dim;  // may alias x or y: this lane read its elements above
#pragma unroll
  for (int j = 0; j < kWarpMaxPerLane; ++j)
    if (lane + 32 * j < dim) orow[lane + 32 * j] = rms_scaled(v[j], inv, w[lane + 32 * j], weight_offset);
}

// Wide rows (dim >= kWideDim, dim % 4 == 0, dim <= 4 * 256 * kWideMaxVec): one 256-thread
// block per row; thread t holds the float4s t, t + 256, ... in registers (all loaded before
// the first FMA), sums them in order, warps reduce by butterfly, warp sums add in warp order
// (rowwise.cuh: the streaming matmul's fused norm computes the same bits).
constexpr int kWideDim = 1024;
// A prefill matmul's input written beside out (add_rms_norm_core): bf16 in the wgmma kernel's
// core-matrix order, kb_count 8-column blocks per row; null: none.
// No padding bytes: kernel parameters are compared bytewise as graph keys (step_graph.h).
struct CoreRows {
  uint2* xb = nullptr;  // [m_pad / 8][kb_count][8 rows][2 x 4 bf16]
  int64_t kb_count = 0;
};

// The wide kernels' common end: this block's row of x is in v (thread t holds float4s t, t + 256, ...);
// out's row = (weight_offset + w) · x / rms(x), the sum of squares in one fixed order; with core.xb
// also its bf16 rounding (to_core_rows_kernel's) at its core-order place.
__device__ __forceinline__ void norm_row_wide(const float4 (&v)[kWideMaxVec], int dim, float eps,
                                              const float* __restrict__ w, float weight_offset,
                                              float* __restrict__ out, const CoreRows& core = {}) {
  __shared__ float warp_sums[kWideNormThreads / 32];
  const int vecs = dim / 4;
  const float sum = warp_sum(thread_sum_squares(v));
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  const float inv = inv_rms(sum_in_warp_order(warp_sums), dim, eps);
  float4* orow = reinterpret_cast<float4*>(out + static_cast<int64_t>(blockIdx.x) * dim);
  const float4* w4 = reinterpret_cast<const float4*>(w);
  const int64_t r = blockIdx.x;
#pragma unroll
  for (int j = 0; j < kWideMaxVec; ++j) {
    const int i = threadIdx.x + 256 * j;
    if (i >= vecs) continue;
    const float4 o = rms_scaled4(v[j], inv, w4[i], weight_offset);
    orow[i] = o;
    if (core.xb)
      core.xb[core_row_index(r, i / 2, core.kb_count) * 2 + i % 2] =
          make_uint2(pack_bf16x2(o.x, o.y), pack_bf16x2(o.z, o.w));
  }
}

__global__ void __launch_bounds__(256) rms_norm_wide_kernel(const float* x, const float* __restrict__ w, int dim,
                                                            float eps, float weight_offset, float* out) {
  pdl_enter();
  const float4* xr = reinterpret_cast<const float4*>(x + static_cast<int64_t>(blockIdx.x) * dim);
  const int vecs = dim / 4;
  float4 v[kWideMaxVec];
#pragma unroll
  for (int j = 0; j < kWideMaxVec; ++j)
    v[j] = threadIdx.x + 256 * j < vecs ? xr[threadIdx.x + 256 * j] : make_float4(0.f, 0.f, 0.f, 0.f);
  norm_row_wide(v, dim, eps, w, weight_offset, out);
}

// x += y, then the wide kernel's norm of x (the same arithmetic as add_kernel then rms_norm_wide_kernel).
// With core.xb: blocks past `rows` (up to the matmul's padded rows) write their core rows' zeros.
__global__ void __launch_bounds__(256) add_rms_norm_wide_kernel(float* x, const float* __restrict__ y,
                                                                const float* __restrict__ w, int dim, float eps,
                                                                float weight_offset, float* __restrict__ out,
                                                                int64_t rows, CoreRows core) {
  pdl_enter();
  if (static_cast<int64_t>(blockIdx.x) >= rows) {
    const int64_t r = blockIdx.x;
    for (int i = threadIdx.x; i < dim / 4; i += kWideNormThreads)
      core.xb[core_row_index(r, i / 2, core.kb_count) * 2 + i % 2] = make_uint2(0u, 0u);
    return;
  }
  float4* xr = reinterpret_cast<float4*>(x + static_cast<int64_t>(blockIdx.x) * dim);
  const float4* yr = reinterpret_cast<const float4*>(y + static_cast<int64_t>(blockIdx.x) * dim);
  const int vecs = dim / 4;
  float4 v[kWideMaxVec];
  load_added_row4(xr, yr, vecs, v);
#pragma unroll
  for (int j = 0; j < kWideMaxVec; ++j)
    if (threadIdx.x + kWideNormThreads * j < vecs) xr[threadIdx.x + kWideNormThreads * j] = v[j];
  norm_row_wide(v, dim, eps, w, weight_offset, out, core);
}

// Any other width: one block per row, strided.
__global__ void rms_norm_block_kernel(const float* x, const float* __restrict__ w, int dim, float eps,
                                      float weight_offset, float* out) {
  pdl_enter();
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
  const bool aligned = dim % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(out) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
  if (dim >= kWideDim && aligned && dim <= 4 * 256 * kWideMaxVec) {
    launch(rms_norm_wide_kernel, static_cast<unsigned>(rows), 256, 0, stream, x, w, static_cast<int>(dim), eps,
           weight_offset, out);
    return;
  }
  if (dim > 32 * kWarpMaxPerLane) {
    launch(rms_norm_block_kernel, static_cast<unsigned>(rows), 256, 0, stream, x, w, static_cast<int>(dim), eps,
           weight_offset, out);
    return;
  }
  constexpr int kRowsPerBlock = 8;
  launch(rms_norm_kernel, static_cast<unsigned>(ceil_div(rows, kRowsPerBlock)), 32 * kRowsPerBlock, 0, stream, x, w,
         rows, static_cast<int>(dim), eps, weight_offset, out);
}

bool add_rms_norm_is_wide(const float* x, const float* y, const float* w, int64_t dim, const float* out) {
  const bool aligned = dim % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(y) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(w) % 16 == 0;
  return dim >= kWideDim && aligned && dim <= 4 * kWideNormThreads * kWideMaxVec;
}

bool add_rms_norm(float* x, const float* y, const float* w, int64_t rows, int64_t dim, float eps, float weight_offset,
                  float* out, cudaStream_t stream) {
  const bool wide = add_rms_norm_is_wide(x, y, w, dim, out);
  if (rows > 0 && dim <= 32 * kWarpMaxPerLane && !wide) {
    constexpr int kRowsPerBlock = 8;
    launch(add_rms_norm_kernel, static_cast<unsigned>(ceil_div(rows, kRowsPerBlock)), 32 * kRowsPerBlock, 0, stream, x,
           y, w, rows, static_cast<int>(dim), eps, weight_offset, out);
    return true;
  }
  if (!wide) return false;
  if (rows == 0) return true;
  launch(add_rms_norm_wide_kernel, static_cast<unsigned>(rows), 256, 0, stream, x, y, w, static_cast<int>(dim), eps,
         weight_offset, out, rows, CoreRows{});
  return true;
}

bool add_rms_norm_writes_core(const float* x, const float* y, const float* w, int64_t dim, const float* out) {
  return add_rms_norm_is_wide(x, y, w, dim, out) && dim % 64 == 0;
}

void add_rms_norm_core(float* x, const float* y, const float* w, int64_t rows, int64_t dim, float eps,
                       float weight_offset, float* out, void* core, int64_t m_pad, cudaStream_t stream) {
  if (!add_rms_norm_writes_core(x, y, w, dim, out) || m_pad < rows) fail_unsupported("add_rms_norm_core dim", dim);
  launch(add_rms_norm_wide_kernel, static_cast<unsigned>(m_pad), 256, 0, stream, x, y, w, static_cast<int>(dim), eps,
         weight_offset, out, rows, CoreRows{static_cast<uint2*>(core), dim / 8});
}

}  // namespace tachyon::kernels::cuda
