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

// The n-tile's outputs from its totals (segment sums in order): bias, the gated activation,
// and the store of the tile's rows.
template <int NT>
__device__ __forceinline__ void store_outputs(const GroupedMatmul& p, const GroupTile& tile, int nt, int lane,
                                              const float (&total)[NT][4]) {
  const int g = lane >> 2, c = lane & 3;
  const float* bias = p.bias_table ? p.bias_table[tile.group] : nullptr;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = g + 8 * (i / 2), col = nt * 8 + 2 * c + (i % 2);
    if (r >= tile.count || col >= p.n) continue;
    float* o = p.out + static_cast<int64_t>(tile.begin + r) * p.out_row_stride + tile.group * p.out_group_stride;
    float v = total[0][i] + (bias ? bias[col] : 0.f);
    if constexpr (NT == 2)
      v = moe_gated(v, total[1][i] + (bias ? bias[p.n + col] : 0.f), p.clamped_swiglu, p.swiglu_limit, p.swiglu_alpha);
    o[col] = v;
  }
}

// What a warp reads for n-tile nt of `tile`: the tile's rows of x at this lane (null past the
// tile's count) and the n-tile's weight rows (and its up tile's, when gated).
template <int NT>
struct WarpOperands {
  const float* x0;
  const float* x1;
  const uint4* wt[NT];
  int64_t kp_count;
};

template <int NT>
__device__ __forceinline__ WarpOperands<NT> warp_operands(const GroupedMatmul& p, const GroupTile& tile, int nt,
                                                          int lane) {
  const int g = lane >> 2;
  auto row_ptr = [&](int i) -> const float* {
    if (i >= tile.count) return nullptr;
    const int e = tile.begin + i;
    const int64_t row = p.x_rows ? p.x_rows[e] : e;
    return p.x + row * p.x_row_stride + tile.group * p.x_group_stride;
  };
  WarpOperands<NT> o;
  o.x0 = row_ptr(g);
  o.x1 = row_ptr(g + 8);
  const uint4* w = static_cast<const uint4*>(p.w_table ? p.w_table[tile.group]
                                                       : static_cast<const char*>(p.w) + tile.group * p.w_group_stride);
  o.kp_count = round_up(p.k, kMmaColPad) / 32;
  const int64_t up_tile = p.n / 8;  // gated: the up rows start n/8 n-tiles further
#pragma unroll
  for (int j = 0; j < NT; ++j) o.wt[j] = w + ((nt + j * up_tile) * o.kp_count) * 32 + lane;
  return o;
}

// Segment s (512 k) of the n-tile: one m16n8k16 chain into acc (zero on entry), U k-pairs per
// load batch. Both kernels run exactly this, so their segment sums are the same bits.
template <int NT, int U>
__device__ __forceinline__ void segment_chain(const GroupedMatmul& p, const WarpOperands<NT>& o, int lane, int64_t s,
                                              float (&acc)[NT][4]) {
  const int c = lane & 3;
  const int64_t kp_begin = s * kPairsPerSegment, kp_end = min(o.kp_count, kp_begin + kPairsPerSegment);
  for (int64_t kp0 = kp_begin; kp0 < kp_end; kp0 += U) {
    uint4 b[U][NT];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < NT; ++j)
        b[u][j] = kp0 + u < kp_end ? load_stream(o.wt[j] + (kp0 + u) * 32) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (kp0 + u >= kp_end) break;
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int64_t k = (kp0 + u) * 32 + 16 * t + 2 * c;
        const uint32_t a[4] = {x_pair(o.x0, k, p.k), x_pair(o.x1, k, p.k), x_pair(o.x0, k + 8, p.k),
                               x_pair(o.x1, k + 8, p.k)};
#pragma unroll
        for (int j = 0; j < NT; ++j)
          mma_bf16(acc[j], a, t == 0 ? b[u][j].x : b[u][j].z, t == 0 ? b[u][j].y : b[u][j].w);
      }
    }
  }
}

// NT n-tiles per warp (2 when gated: the gate tile and its up tile), U k-pairs per load batch.
// A warp walks all of k for its n-tile.
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
  const WarpOperands<NT> o = warp_operands<NT>(p, tile, nt, lane);
  float total[NT][4] = {};
  const int64_t num_segments = ceil_div(o.kp_count, kPairsPerSegment);
  for (int64_t s = 0; s < num_segments; ++s) {
    float acc[NT][4] = {};
    segment_chain<NT, U>(p, o, lane, s, acc);
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) total[j][i] += acc[j][i];  // segment sums in order, from 0.f
  }
  store_outputs<NT>(p, tile, nt, lane, total);
}

// Split-K, for decode-sized launches (a few tiles of one or two rows: the kernel above has one
// warp per n-tile then, each walking all of k, too few bytes in flight to stream the experts'
// weights). CTA (n-group, segment, tile): its warps run segment_chain for one segment each and
// write the sums to `partial`; the last CTA of (tile, n-group) to finish adds them in segment
// order from 0.f and stores, as the kernel above does, so the bits are the same.
template <int NT, int U>
__global__ void __launch_bounds__(kWarps * 32) grouped_matmul_splitk_kernel(GroupedMatmul p,
                                                                            const GroupTile* __restrict__ tiles,
                                                                            const int32_t* __restrict__ num_tiles,
                                                                            float* __restrict__ partial,
                                                                            unsigned* __restrict__ counters) {
  __shared__ bool is_last;
  pdl_wait();
  const int t = static_cast<int>(blockIdx.z);
  if (num_tiles && t >= *num_tiles) return;
  pdl_launch_dependents();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nt = blockIdx.x * kWarps + warp, seg = static_cast<int>(blockIdx.y), segments = static_cast<int>(gridDim.y);
  const GroupTile tile = tiles[t];
  const bool active = nt * 8 < p.n;
  const int64_t n_tiles = static_cast<int64_t>(gridDim.x) * kWarps;
  // partial: [tile][segment][n-tile][NT][32 lanes] float4, each lane's accumulators as they are.
  const auto slot = [&](int s, int j) {
    return reinterpret_cast<float4*>(partial) + (((static_cast<int64_t>(t) * segments + s) * n_tiles + nt) * NT + j) * 32 +
           lane;
  };
  if (active) {
    const WarpOperands<NT> o = warp_operands<NT>(p, tile, nt, lane);
    float acc[NT][4] = {};
    segment_chain<NT, U>(p, o, lane, seg, acc);
#pragma unroll
    for (int j = 0; j < NT; ++j) *slot(seg, j) = make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]);
  }
  __threadfence();
  __syncthreads();
  unsigned* counter = counters + static_cast<int64_t>(t) * gridDim.x + blockIdx.x;
  if (threadIdx.x == 0) is_last = atomicAdd(counter, 1u) == static_cast<unsigned>(segments - 1);
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  if (active) {
    float total[NT][4] = {};
    for (int s = 0; s < segments; ++s)
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const float4 v = __ldcg(slot(s, j));
        total[j][0] += v.x, total[j][1] += v.y, total[j][2] += v.z, total[j][3] += v.w;
      }
    store_outputs<NT>(p, tile, nt, lane, total);
  }
  if (threadIdx.x == 0) *counter = 0u;  // re-armed for the next launch (stream-ordered)
}

int64_t n_groups(const GroupedMatmul& p) { return ceil_div(ceil_div(p.n, 8), kWarps); }
int64_t segments(const GroupedMatmul& p) { return ceil_div(round_up(p.k, kMmaColPad) / 32, kPairsPerSegment); }

}  // namespace

GroupedSplitKSize grouped_splitk_size(const GroupedMatmul& p, int64_t max_tiles) {
  if (max_tiles == 0 || max_tiles > kGroupedSplitKMaxTiles || segments(p) < 2) return {};
  const int64_t nt_count = p.gated ? 2 : 1;
  return {static_cast<size_t>(max_tiles * segments(p) * n_groups(p) * kWarps * nt_count * 32) * sizeof(float4),
          static_cast<size_t>(max_tiles * n_groups(p))};
}

void grouped_matmul(const GroupedMatmul& p, const GroupTile* tiles, const int32_t* num_tiles, int64_t max_tiles,
                    cudaStream_t stream, const GroupedSplitK* splitk) {
  if (max_tiles == 0 || p.n == 0) return;
  if (p.gated && p.n % 8 != 0) fail_unsupported("gated grouped matmul n (multiple of 8)", p.n);
  if (splitk && grouped_splitk_size(p, max_tiles).counters > 0) {
    const dim3 grid(static_cast<unsigned>(n_groups(p)), static_cast<unsigned>(segments(p)),
                    static_cast<unsigned>(max_tiles));
    if (p.gated)
      launch(grouped_matmul_splitk_kernel<2, 8>, grid, dim3(kWarps * 32), 0, stream, p, tiles, num_tiles,
             splitk->partial, splitk->counters);
    else
      launch(grouped_matmul_splitk_kernel<1, 16>, grid, dim3(kWarps * 32), 0, stream, p, tiles, num_tiles,
             splitk->partial, splitk->counters);
    TACHYON_CUDA_LAUNCH_CHECK();
    return;
  }
  const dim3 grid(static_cast<unsigned>(n_groups(p)), static_cast<unsigned>(max_tiles));
  if (p.gated)
    launch(grouped_matmul_kernel<2, 8>, grid, dim3(kWarps * 32), 0, stream, p, tiles, num_tiles);
  else
    launch(grouped_matmul_kernel<1, 16>, grid, dim3(kWarps * 32), 0, stream, p, tiles, num_tiles);
  TACHYON_CUDA_LAUNCH_CHECK();
}

}  // namespace tachyon::kernels::cuda
