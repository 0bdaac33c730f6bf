#include "kernels/cuda/grouped_matmul.cuh"

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mma.cuh"

namespace tachyon::kernels::cuda {
namespace {

constexpr int kWarps = 4;  // small CTAs: a decode step has few (tile, n-tile) pairs per expert
constexpr int kPairsPerSegment = static_cast<int>(kSegmentK / 32);

// x[k..k+1] as a bf16 pair (zero past k_end or for a missing row). Strides may be odd, so
// two scalar loads (an aligned float2 path measured slower: docs/perf/cuda.md).
__device__ __forceinline__ uint32_t x_pair(const float* __restrict__ xr, int64_t k, int64_t k_end) {
  if (!xr || k >= k_end) return 0u;
  return pack_bf16x2(xr[k], xr[k + 1]);
}

__device__ __forceinline__ float sigmoidf_(float x) { return 1.f / (1.f + expf(-x)); }

// NT n-tiles per warp (2 when gated: the gate tile and its up tile), U k-pairs per load batch.
template <int NT, int U>
__global__ void __launch_bounds__(kWarps * 32) grouped_matmul_kernel(GroupedMatmul p, const GroupTile* __restrict__ tiles,
                                                                     const int32_t* __restrict__ num_tiles) {
  pdl_wait();  // the tile list, x and the weight tables may come from the previous kernels
  if (num_tiles && static_cast<int>(blockIdx.y) >= *num_tiles) return;
  pdl_launch_dependents();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nt = blockIdx.x * kWarps + warp;
  if (nt * 8 >= p.n) return;
  const GroupTile tile = tiles[blockIdx.y];
  const int g = lane >> 2, c = lane & 3;
  auto row_ptr = [&](int i) -> const float* {
    if (i >= tile.count) return nullptr;
    const int e = tile.begin + i;
    const int64_t row = p.x_rows ? p.x_rows[e] : e;
    return p.x + row * p.x_row_stride + tile.group * p.x_group_stride;
  };
  const float* x0 = row_ptr(g);
  const float* x1 = row_ptr(g + 8);
  const uint4* w = static_cast<const uint4*>(p.w_table ? p.w_table[tile.group]
                                                       : static_cast<const char*>(p.w) + tile.group * p.w_group_stride);
  const int64_t kp_count = round_up(p.k, kMmaColPad) / 32;
  const int64_t up_tile = p.n / 8;  // gated: the up rows start n/8 n-tiles further
  const uint4* wt[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) wt[j] = w + ((nt + j * up_tile) * kp_count) * 32 + lane;

  float total[NT][4] = {};
  const int64_t num_segments = ceil_div(kp_count, kPairsPerSegment);
  for (int64_t s = 0; s < num_segments; ++s) {
    const int64_t kp_begin = s * kPairsPerSegment, kp_end = min(kp_count, kp_begin + kPairsPerSegment);
    float acc[NT][4] = {};
    for (int64_t kp0 = kp_begin; kp0 < kp_end; kp0 += U) {
      uint4 b[U][NT];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < NT; ++j)
          b[u][j] = kp0 + u < kp_end ? load_stream(wt[j] + (kp0 + u) * 32) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (kp0 + u >= kp_end) break;
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          const int64_t k = (kp0 + u) * 32 + 16 * t + 2 * c;
          const uint32_t a[4] = {x_pair(x0, k, p.k), x_pair(x1, k, p.k), x_pair(x0, k + 8, p.k),
                                 x_pair(x1, k + 8, p.k)};
#pragma unroll
          for (int j = 0; j < NT; ++j)
            mma_bf16(acc[j], a, t == 0 ? b[u][j].x : b[u][j].z, t == 0 ? b[u][j].y : b[u][j].w);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) total[j][i] += acc[j][i];  // segment sums in order, from 0.f
  }
  const float* bias = p.bias_table ? p.bias_table[tile.group] : nullptr;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = g + 8 * (i / 2), col = nt * 8 + 2 * c + (i % 2);
    if (r >= tile.count || col >= p.n) continue;
    float* o = p.out + static_cast<int64_t>(tile.begin + r) * p.out_row_stride + tile.group * p.out_group_stride;
    float v = total[0][i] + (bias ? bias[col] : 0.f);
    if constexpr (NT == 2) {
      float u = total[1][i] + (bias ? bias[p.n + col] : 0.f);
      if (p.clamped_swiglu) {
        v = fminf(v, p.swiglu_limit);
        u = fminf(fmaxf(u, -p.swiglu_limit), p.swiglu_limit);
        v = (u + 1.f) * (v * sigmoidf_(v * p.swiglu_alpha));
      } else {
        v = v / (1.f + expf(-v)) * u;
      }
    }
    o[col] = v;
  }
}

}  // namespace

void grouped_matmul(const GroupedMatmul& p, const GroupTile* tiles, const int32_t* num_tiles, int64_t max_tiles,
                    cudaStream_t stream) {
  if (max_tiles == 0 || p.n == 0) return;
  if (p.gated && p.n % 8 != 0) fail_unsupported("gated grouped matmul n (multiple of 8)", p.n);
  const dim3 grid(static_cast<unsigned>(ceil_div(ceil_div(p.n, 8), kWarps)), static_cast<unsigned>(max_tiles));
  if (p.gated)
    launch(grouped_matmul_kernel<2, 8>, grid, dim3(kWarps * 32), 0, stream, p, tiles, num_tiles);
  else
    launch(grouped_matmul_kernel<1, 16>, grid, dim3(kWarps * 32), 0, stream, p, tiles, num_tiles);
  TACHYON_CUDA_LAUNCH_CHECK();
}

}  // namespace tachyon::kernels::cuda
