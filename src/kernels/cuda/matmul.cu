#include "kernels/cuda/matmul.cuh"
#include "kernels/cuda/matmul_stream.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/core_tensor_map.h"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace tachyon::kernels::cuda {
namespace {

// The A fragment of m-tile rows [r0, r0 + 16) and k-tile columns [k0, k0 + 16).
__device__ __forceinline__ void load_a_fragment(const float* __restrict__ x, int M, int K, int r0, int k0, int lane,
                                                uint32_t (&a)[4]) {
  const int g = lane >> 2, c = lane & 3;
  a[0] = load_x_pair(x, M, K, r0 + g, k0 + 2 * c);
  a[1] = load_x_pair(x, M, K, r0 + g + 8, k0 + 2 * c);
  a[2] = load_x_pair(x, M, K, r0 + g, k0 + 2 * c + 8);
  a[3] = load_x_pair(x, M, K, r0 + g + 8, k0 + 2 * c + 8);
}

__device__ __forceinline__ float finish(float total, const float* __restrict__ bias, int col) {
  return total + (bias ? bias[col] : 0.f);
}

// Split-K fix-up, run by the last CTA of a column group (256 threads): each output's segment
// sums added in segment order (the canonical reduction, common.cuh), then the bias; the
// group's counter is re-armed for the next launch (stream-ordered).
template <int kGroupCols>
__device__ __forceinline__ void add_segment_sums(const float* partial, int M, int N, int n_pad,
                                                 int num_segments, const float* __restrict__ bias,
                                                 float* __restrict__ out, unsigned* counters) {
  for (int i = threadIdx.x; i < M * kGroupCols; i += 256) {
    const int row = i / kGroupCols, cc = blockIdx.x * kGroupCols + i % kGroupCols;
    if (cc >= N) continue;
    float total = 0.f;
    for (int s2 = 0; s2 < num_segments; ++s2) total += __ldcg(partial + (static_cast<int64_t>(s2) * M + row) * n_pad + cc);
    out[static_cast<int64_t>(row) * N + cc] = finish(total, bias, cc);
  }
  if (threadIdx.x == 0) counters[blockIdx.x] = 0u;
}

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

// ---- skinny: M <= 64 ---------------------------------------------------------------------
// One CTA per NTW n-tiles; its 8 warps take the k segments round-robin, each warp loading its
// whole segment's weights (U k-pairs) before the first MMA, so one DRAM round trip per warp.
// x is read as f32 and rounded in registers (M <= 16), or from A fragments converted once.
constexpr int kSkinnyWarps = 8;
constexpr int kPairsPerSegment = static_cast<int>(kSegmentK / 32);

template <int MT, int NTW, int U, bool kFragA>
__global__ void __launch_bounds__(256) matmul_skinny_kernel(const float* __restrict__ x,
                                                            const uint4* __restrict__ xa, int M, int K,
                                                            const uint4* __restrict__ w, int N, int kp_count,
                                                            const float* __restrict__ bias, float* __restrict__ out) {
  pdl_enter();
  constexpr int kTileFloats = MT * NTW * 32 * 4;  // one warp's partial sums
  constexpr int kPerThread = (kTileFloats + 255) / 256;
  extern __shared__ float partial[];  // [kSkinnyWarps][kTileFloats]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nt0 = blockIdx.x * NTW;
  const int k_tiles = 2 * kp_count;
  const int num_segments = (kp_count + kPairsPerSegment - 1) / kPairsPerSegment;
  float total[kPerThread];
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) total[i] = 0.f;

  for (int round = 0; round * kSkinnyWarps < num_segments; ++round) {
    const int s = round * kSkinnyWarps + warp;
    float acc[MT][NTW][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NTW; ++nt)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[mt][nt][j] = 0.f;
    if (s < num_segments) {
      const int kp_begin = s * kPairsPerSegment, kp_end = min(kp_count, kp_begin + kPairsPerSegment);
      for (int kp0 = kp_begin; kp0 < kp_end; kp0 += U) {
        uint4 b[U][NTW];
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int nt = 0; nt < NTW; ++nt)
            b[u][nt] = kp0 + u < kp_end
                           ? load_stream(w + (static_cast<int64_t>(nt0 + nt) * kp_count + kp0 + u) * 32 + lane)
                           : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < U; ++u) {
          if (kp0 + u >= kp_end) break;
#pragma unroll
          for (int t = 0; t < 2; ++t)
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              uint32_t a[4];
              if constexpr (kFragA) {
                const uint4 v = xa[(static_cast<int64_t>(mt) * k_tiles + 2 * (kp0 + u) + t) * 32 + lane];
                a[0] = v.x, a[1] = v.y, a[2] = v.z, a[3] = v.w;
              } else {
                load_a_fragment(x, M, K, 16 * mt, (kp0 + u) * 32 + 16 * t, lane, a);
              }
#pragma unroll
              for (int nt = 0; nt < NTW; ++nt)
                mma_bf16(acc[mt][nt], a, t == 0 ? b[u][nt].x : b[u][nt].z, t == 0 ? b[u][nt].y : b[u][nt].w);
            }
        }
      }
      float* mine = partial + warp * kTileFloats;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NTW; ++nt)
          *reinterpret_cast<float4*>(mine + ((mt * NTW + nt) * 32 + lane) * 4) =
              make_float4(acc[mt][nt][0], acc[mt][nt][1], acc[mt][nt][2], acc[mt][nt][3]);
    }
    __syncthreads();
    // Segment sums in segment order (the canonical order, common.cuh).
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int idx = threadIdx.x + 256 * i;
      if (idx < kTileFloats)
        for (int ww = 0; ww < kSkinnyWarps && round * kSkinnyWarps + ww < num_segments; ++ww)
          total[i] += partial[ww * kTileFloats + idx];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int idx = threadIdx.x + 256 * i;
    if (idx >= kTileFloats) break;
    const int j = idx % 4, l = (idx / 4) % 32, nt = (idx / 128) % NTW, mt = idx / (128 * NTW);
    const int row = 16 * mt + l / 4 + 8 * (j / 2), col = (nt0 + nt) * 8 + 2 * (l % 4) + (j % 2);
    if (row < M && col < N) out[static_cast<int64_t>(row) * N + col] = finish(total[i], bias, col);
  }
}

// ---- decode: M <= 16 ----------------------------------------------------------------------
// One CTA per n-tile (8 columns). Per round of 8 segments (4096 k), each warp first issues
// the 16 weight loads of its segment (8 KB in flight per warp, one DRAM round trip), then the
// CTA stages the round's x as bf16 A fragments in shared memory (for M <= 8 only the rows
// 0-7 half: rows 8-15 are zero), then each warp runs its segment's MMA chain from shared
// memory. Same canonical order as every other matmul kernel here.
constexpr int kDecodeRoundTiles = kSkinnyWarps * kPairsPerSegment * 2;  // k-tiles per round

template <bool kHalf>
__global__ void __launch_bounds__(256) matmul_decode_kernel(const float* __restrict__ x, int M, int K,
                                                            const uint4* __restrict__ w, int N, int kp_count,
                                                            const float* __restrict__ bias,
                                                            float* __restrict__ out) {
  pdl_enter();
  constexpr int kRegs = kHalf ? 2 : 4;  // A registers staged per lane per k-tile
  extern __shared__ uint32_t xs[];      // [kDecodeRoundTiles][32 lanes][kRegs]
  __shared__ float partial[kSkinnyWarps][128];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nt = blockIdx.x;
  const int num_segments = (kp_count + kPairsPerSegment - 1) / kPairsPerSegment;
  float total = 0.f;
  for (int round = 0; round * kSkinnyWarps < num_segments; ++round) {
    const int s = round * kSkinnyWarps + warp;
    const int kp_begin = s * kPairsPerSegment, kp_end = min(kp_count, kp_begin + kPairsPerSegment);
    uint4 b[kPairsPerSegment];
#pragma unroll
    for (int u = 0; u < kPairsPerSegment; ++u)
      b[u] = kp_begin + u < kp_end ? load_stream(w + (static_cast<int64_t>(nt) * kp_count + kp_begin + u) * 32 + lane)
                                   : make_uint4(0, 0, 0, 0);
    const int kt0 = round * kDecodeRoundTiles;
#pragma unroll 4
    for (int i = threadIdx.x; i < kDecodeRoundTiles * 32; i += 256) {
      const int l = i % 32, k = 16 * (kt0 + i / 32) + 2 * (l & 3);
      uint32_t* dst = xs + i * kRegs;
      dst[0] = load_x_pair(x, M, K, l >> 2, k);
      dst[1] = load_x_pair(x, M, K, l >> 2, k + 8);
      if constexpr (!kHalf) {
        dst[2] = load_x_pair(x, M, K, (l >> 2) + 8, k);
        dst[3] = load_x_pair(x, M, K, (l >> 2) + 8, k + 8);
      }
    }
    __syncthreads();
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    if (s < num_segments) {
#pragma unroll
      for (int u = 0; u < kPairsPerSegment; ++u) {
        if (kp_begin + u >= kp_end) break;
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          const int kt = 2 * (kp_begin + u) + t - kt0;
          uint32_t a[4];
          if constexpr (kHalf) {
            const uint2 v = reinterpret_cast<const uint2*>(xs)[kt * 32 + lane];
            a[0] = v.x, a[1] = 0u, a[2] = v.y, a[3] = 0u;
          } else {
            const uint4 v = reinterpret_cast<const uint4*>(xs)[kt * 32 + lane];
            a[0] = v.x, a[1] = v.z, a[2] = v.y, a[3] = v.w;
          }
          mma_bf16(acc, a, t == 0 ? b[u].x : b[u].z, t == 0 ? b[u].y : b[u].w);
        }
      }
      *reinterpret_cast<float4*>(&partial[warp][lane * 4]) = make_float4(acc[0], acc[1], acc[2], acc[3]);
    }
    __syncthreads();
    // Segment sums in segment order (the canonical order, common.cuh).
    if (threadIdx.x < 128)
      for (int ww = 0; ww < kSkinnyWarps && round * kSkinnyWarps + ww < num_segments; ++ww)
        total += partial[ww][threadIdx.x];
    __syncthreads();
  }
  if (threadIdx.x < 128) {
    const int j = threadIdx.x % 4, l = threadIdx.x / 4;
    const int row = l / 4 + 8 * (j / 2), col = nt * 8 + 2 * (l % 4) + (j % 2);
    if (row < M && col < N) out[static_cast<int64_t>(row) * N + col] = finish(total, bias, col);
  }
}

// ---- split-K decode: M <= 64 ---------------------------------------------------------------
// Grid (n-groups of 8 n-tiles, k segments): warp w of CTA (g, s) computes n-tile 8g + w over
// segment s only. It issues the 16 loads of its segment's weights (8 KB per warp, 64 KB per
// CTA, one DRAM round trip) before pdl_wait, so the weights stream while the previous kernel
// finishes; then the CTA stages x's segment as bf16 A fragments in shared memory, each warp
// runs the segment's MMA chain and writes the segment sum to `partial`; the last CTA of the
// n-group to finish (a counter per group) adds the segment sums in segment order and writes
// out. Same canonical order as every other kernel here, so the bits are the same.
constexpr int kSplitWarps = 8;

// kSmemB: the weights go to shared memory by cp.async instead of registers (64 KB per CTA,
// no register cost, so three CTAs fit an SM at M <= 8 and more bytes are in flight).
template <int MT, bool kHalf, bool kSmemB>  // MT m-tiles of 16 rows; kHalf: M <= 8 (A rows 8-15 are zero)
__global__ void __launch_bounds__(256, 2) matmul_splitk_kernel(const float* __restrict__ x, int M, int K,
                                                               const uint4* __restrict__ w, int N, int kp_count,
                                                               const float* __restrict__ bias, float* __restrict__ out,
                                                               float* __restrict__ partial,
                                                               unsigned* __restrict__ counters) {
  constexpr int kRegs = kHalf ? 2 : 4;  // A registers staged per lane per k-tile
  constexpr int kSegTiles = 2 * kPairsPerSegment;
  extern __shared__ uint4 smem_splitk[];
  constexpr int kSmemBUnits = kSmemB ? kSplitWarps * kPairsPerSegment * 32 : 0;
  uint32_t* xs = reinterpret_cast<uint32_t*>(smem_splitk + kSmemBUnits);  // [MT][kSegTiles][32 lanes][kRegs]
  __shared__ bool is_last;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nt = blockIdx.x * kSplitWarps + warp, seg = blockIdx.y, num_segments = gridDim.y;
  const int kp_begin = seg * kPairsPerSegment, kp_end = min(kp_count, kp_begin + kPairsPerSegment);
  uint4 b[kSmemB ? 1 : kPairsPerSegment];
  uint4* bs = smem_splitk + warp * kPairsPerSegment * 32;  // kSmemB: this warp's [16 pairs][32 lanes]
  if constexpr (kSmemB) {
#pragma unroll
    for (int u = 0; u < kPairsPerSegment; ++u)
      if (kp_begin + u < kp_end)
        cp_async16(bs + u * 32 + lane, w + (static_cast<int64_t>(nt) * kp_count + kp_begin + u) * 32 + lane);
    cp_async_commit();
  } else {
#pragma unroll
    for (int u = 0; u < kPairsPerSegment; ++u)
      b[u] = kp_begin + u < kp_end ? load_stream(w + (static_cast<int64_t>(nt) * kp_count + kp_begin + u) * 32 + lane)
                                   : make_uint4(0, 0, 0, 0);
  }
  pdl_wait();
  for (int i = threadIdx.x; i < MT * kSegTiles * 32; i += 256) {
    const int l = i % 32, kt = (i / 32) % kSegTiles, mt = i / (32 * kSegTiles);
    const int k = kp_begin * 32 + 16 * kt + 2 * (l & 3), row = 16 * mt + (l >> 2);
    uint32_t* dst = xs + i * kRegs;
    dst[0] = load_x_pair(x, M, K, row, k);
    dst[1] = load_x_pair(x, M, K, row, k + 8);
    if constexpr (!kHalf) {
      dst[2] = load_x_pair(x, M, K, row + 8, k);
      dst[3] = load_x_pair(x, M, K, row + 8, k + 8);
    }
  }
  if constexpr (kSmemB) cp_async_wait<0>();  // each lane reads back only what it copied
  __syncthreads();
  pdl_launch_dependents();
  float acc[MT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) acc[mt][0] = acc[mt][1] = acc[mt][2] = acc[mt][3] = 0.f;
#pragma unroll
  for (int u = 0; u < kPairsPerSegment; ++u) {
    if (kp_begin + u >= kp_end) break;
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int kt = 2 * u + t;
        uint32_t a[4];
        if constexpr (kHalf) {
          const uint2 v = reinterpret_cast<const uint2*>(xs)[(mt * kSegTiles + kt) * 32 + lane];
          a[0] = v.x, a[1] = 0u, a[2] = v.y, a[3] = 0u;
        } else {
          const uint4 v = reinterpret_cast<const uint4*>(xs)[(mt * kSegTiles + kt) * 32 + lane];
          a[0] = v.x, a[1] = v.z, a[2] = v.y, a[3] = v.w;
        }
        const uint4 bu = kSmemB ? bs[u * 32 + lane] : b[u];
        mma_bf16(acc[mt], a, t == 0 ? bu.x : bu.z, t == 0 ? bu.y : bu.w);
      }
  }
  const int n_pad = gridDim.x * kSplitWarps * 8;
  const int g = lane / 4, c = lane % 4, col = nt * 8 + 2 * c;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = 16 * mt + g + 8 * h;
      if (row < M)
        *reinterpret_cast<float2*>(partial + (static_cast<int64_t>(seg) * M + row) * n_pad + col) =
            make_float2(acc[mt][2 * h], acc[mt][2 * h + 1]);
    }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) is_last = atomicAdd(&counters[blockIdx.x], 1u) == static_cast<unsigned>(num_segments - 1);
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  add_segment_sums<kSplitWarps * 8>(partial, M, N, n_pad, num_segments, bias, out, counters);
}

template <int MT, bool kHalf, bool kSmemB>
void launch_splitk(const float* x, int M, int K, const uint4* w, int N, int kp_count, const float* bias, float* out,
                   float* partial, unsigned* counters, cudaStream_t stream) {
  constexpr size_t smem = static_cast<size_t>(MT) * 2 * kPairsPerSegment * 32 * (kHalf ? 2 : 4) * sizeof(uint32_t) +
                          (kSmemB ? static_cast<size_t>(kSplitWarps) * kPairsPerSegment * 32 * sizeof(uint4) : 0);
  static const bool configured = [] {
    TACHYON_CUDA_CHECK(cudaFuncSetAttribute(matmul_splitk_kernel<MT, kHalf, kSmemB>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    return true;
  }();
  (void)configured;
  const int64_t groups = round_up(N, kMmaRowPad) / 8 / kSplitWarps;
  const int segments = static_cast<int>(ceil_div(kp_count, kPairsPerSegment));
  launch(matmul_splitk_kernel<MT, kHalf, kSmemB>, dim3(static_cast<unsigned>(groups), static_cast<unsigned>(segments)), 256,
         smem, stream, x, M, K, w, N, kp_count, bias, out, partial, counters);
}

// ---- batched decode: 17-64 rows (v8) -------------------------------------------------------
// The weights are streamed once and x's A fragments (converted once by to_a_fragments) are
// reused across many n-tiles: a CTA owns 16 n-tiles (warp w: n-tiles 2w, 2w + 1 of its
// group) and walks its k segments in order; per segment the CTA stages the segment's A
// fragments (MT m-tiles x 32 k-tiles, 16 KB per m-tile) in shared memory once, and each warp
// reads each A fragment once for its two n-tiles. Weights are loaded in batches of 4 k-pairs
// x 2 n-tiles (4 KB per warp), the next batch (across segment boundaries too) issued before
// the current batch's MMAs. With one split (grid.y == 1) a CTA covers all of k and adds the
// segment sums in order into per-lane totals in shared memory; with more splits (short-N
// matrices, to fill the GPU) each segment's sum goes to `partial` and the last CTA of the
// n-group adds them in segment order, as split-K does. Canonical order either way.
constexpr int kBatchedNtw = 2;                                // n-tiles per warp
constexpr int kBatchedGroupTiles = kSplitWarps * kBatchedNtw;  // n-tiles per CTA
constexpr int kBatchedU = 4;                                  // k-pairs per load batch
constexpr int kBatchedBatches = kPairsPerSegment / kBatchedU;

template <int MT>
__global__ void __launch_bounds__(256, 2) matmul_batched_kernel(const uint4* __restrict__ xa, int M, int k_tiles,
                                                                int xa_k_stride, const uint4* __restrict__ w, int N,
                                                                int kp_count, int segs_per_split,
                                                                const float* __restrict__ bias, float* __restrict__ out,
                                                                float* __restrict__ partial,
                                                                unsigned* __restrict__ counters) {
  constexpr int kSegTiles = 2 * kPairsPerSegment;
  extern __shared__ uint4 smem_b[];
  uint4* as = smem_b;  // [MT][kSegTiles][32 lanes]
  __shared__ bool is_last;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nt_base = blockIdx.x * kBatchedGroupTiles + warp * kBatchedNtw;
  // totals: [warp][NTW][MT][32 lanes] float4, private to each lane
  float4* tot = reinterpret_cast<float4*>(as + MT * kSegTiles * 32) + (warp * kBatchedNtw * MT) * 32 + lane;
  const int num_segments = static_cast<int>((kp_count + kPairsPerSegment - 1) / kPairsPerSegment);
  const int s_begin = blockIdx.y * segs_per_split, s_end = min(num_segments, s_begin + segs_per_split);
  const bool split = gridDim.y > 1;

  uint4 b[2][kBatchedU][kBatchedNtw];
  auto load_batch = [&](uint4 (&dst)[kBatchedU][kBatchedNtw], int s, int batch) {
    const int kp_end = min(kp_count, (s + 1) * kPairsPerSegment);
#pragma unroll
    for (int u = 0; u < kBatchedU; ++u) {
      const int kp = s * kPairsPerSegment + batch * kBatchedU + u;
#pragma unroll
      for (int j = 0; j < kBatchedNtw; ++j)
        dst[u][j] = s < s_end && kp < kp_end
                        ? load_stream(w + (static_cast<int64_t>(nt_base + j) * kp_count + kp) * 32 + lane)
                        : make_uint4(0, 0, 0, 0);
    }
  };
  load_batch(b[0], s_begin, 0);  // weights are constant: before the wait (PDL)
  pdl_enter();
  for (int s = s_begin; s < s_end; ++s) {
    const int kp_begin = s * kPairsPerSegment, kp_end = min(kp_count, kp_begin + kPairsPerSegment);
    __syncthreads();  // every warp is done with the previous segment's A fragments
    for (int i = threadIdx.x; i < MT * kSegTiles * 32; i += 256) {
      const int l = i % 32, kt = (i / 32) % kSegTiles, mt = i / (32 * kSegTiles);
      const int gkt = 2 * kp_begin + kt;
      if (gkt < k_tiles) cp_async16(as + i, xa + (static_cast<int64_t>(mt) * xa_k_stride + gkt) * 32 + l);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    float acc[MT][kBatchedNtw][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int j = 0; j < kBatchedNtw; ++j) acc[mt][j][0] = acc[mt][j][1] = acc[mt][j][2] = acc[mt][j][3] = 0.f;
#pragma unroll
    for (int batch = 0; batch < kBatchedBatches; ++batch) {
      // Prefetch the next batch (the next segment's first one after the last batch).
      if (batch + 1 < kBatchedBatches) load_batch(b[(batch + 1) % 2], s, batch + 1);
      else load_batch(b[(batch + 1) % 2], s + 1, 0);
      const auto& bc = b[batch % 2];
#pragma unroll
      for (int u = 0; u < kBatchedU; ++u) {
        const int kp = kp_begin + batch * kBatchedU + u;
        if (kp >= kp_end) break;
#pragma unroll
        for (int t = 0; t < 2; ++t)
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            const uint4 v = as[(mt * kSegTiles + 2 * (batch * kBatchedU + u) + t) * 32 + lane];
            const uint32_t a[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int j = 0; j < kBatchedNtw; ++j)
              mma_bf16(acc[mt][j], a, t == 0 ? bc[u][j].x : bc[u][j].z, t == 0 ? bc[u][j].y : bc[u][j].w);
          }
      }
    }
    if (split) {
      const int n_pad = gridDim.x * kBatchedGroupTiles * 8;
      const int g = lane / 4, c = lane % 4;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int j = 0; j < kBatchedNtw; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = 16 * mt + g + 8 * h, col = (nt_base + j) * 8 + 2 * c;
            if (row < M)
              *reinterpret_cast<float2*>(partial + (static_cast<int64_t>(s) * M + row) * n_pad + col) =
                  make_float2(acc[mt][j][2 * h], acc[mt][j][2 * h + 1]);
          }
    } else {
      // Segment sums in segment order from 0.f (the canonical order, common.cuh).
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int j = 0; j < kBatchedNtw; ++j) {
          float4 t4 = s == s_begin ? make_float4(0.f, 0.f, 0.f, 0.f) : tot[(j * MT + mt) * 32];
          t4.x += acc[mt][j][0], t4.y += acc[mt][j][1], t4.z += acc[mt][j][2], t4.w += acc[mt][j][3];
          tot[(j * MT + mt) * 32] = t4;
        }
    }
  }
  if (!split) {
    const int g = lane / 4, c = lane % 4;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int j = 0; j < kBatchedNtw; ++j) {
        const float4 t4 = tot[(j * MT + mt) * 32];
        const float v[4] = {t4.x, t4.y, t4.z, t4.w};
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int row = 16 * mt + g + 8 * (r / 2), col = (nt_base + j) * 8 + 2 * c + r % 2;
          if (row < M && col < N) out[static_cast<int64_t>(row) * N + col] = finish(v[r], bias, col);
        }
      }
    return;
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) is_last = atomicAdd(&counters[blockIdx.x], 1u) == gridDim.y - 1;
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  add_segment_sums<kBatchedGroupTiles * 8>(partial, M, N, gridDim.x * kBatchedGroupTiles * 8, num_segments, bias,
                                           out, counters);
}

// splits: 1 = each CTA covers all of k; 0 = by shape (split k while the n-groups alone give
// fewer than one CTA per SM).
template <int MT>
void launch_batched(const uint4* xa, int M, int k_tiles, int xa_k_stride, const uint4* w, int N, int kp_count,
                    const float* bias, float* out, float* partial, unsigned* counters, int splits, cudaStream_t stream) {
  constexpr size_t smem = static_cast<size_t>(MT) * 2 * kPairsPerSegment * 32 * sizeof(uint4) +
                          static_cast<size_t>(kSplitWarps) * kBatchedNtw * MT * 32 * sizeof(float4);
  static const bool configured = [] {
    TACHYON_CUDA_CHECK(cudaFuncSetAttribute(matmul_batched_kernel<MT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(smem)));
    return true;
  }();
  (void)configured;
  const int64_t groups = round_up(N, kMmaRowPad) / 8 / kBatchedGroupTiles;
  const int segments = static_cast<int>(ceil_div(kp_count, kPairsPerSegment));
  if (splits == 0) splits = groups >= 132 ? 1 : static_cast<int>(std::min<int64_t>(segments, ceil_div(264, groups)));
  const int per_split = static_cast<int>(ceil_div(segments, splits));
  splits = static_cast<int>(ceil_div(segments, per_split));
  launch(matmul_batched_kernel<MT>, dim3(static_cast<unsigned>(groups), static_cast<unsigned>(splits)), 256, smem,
         stream, xa, M, k_tiles, xa_k_stride, w, N, kp_count, per_split, bias, out, partial, counters);
}

// ---- tiled: M > 64 ------------------------------------------------------------------------
constexpr int kTileM = 8;    // m-tiles (16 rows) per CTA
constexpr int kTileN = 16;   // n-tiles (8 columns) per CTA
constexpr int kStageKt = 4;  // k-tiles (16) per pipeline stage
constexpr int kStages = 4;
constexpr int kStagesPerSegment = static_cast<int>(kSegmentK / (16 * kStageKt));
constexpr int kStageUnitsA = kTileM * kStageKt * 32;        // uint4 per stage
constexpr int kStageUnitsB = kTileN * (kStageKt / 2) * 32;  // uint4 per stage
constexpr size_t kTiledSmem = kStages * (kStageUnitsA + kStageUnitsB) * sizeof(uint4);

// x [M, K] f32 -> A fragments [m_tiles][k_tiles][32 lanes] x uint4, zero-padded.
__global__ void to_a_fragments_kernel(const float* __restrict__ x, int M, int K, int64_t m_tiles, int k_tiles,
                                      uint4* __restrict__ xa) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m_tiles * k_tiles * 32) return;
  const int lane = static_cast<int>(i % 32);
  const int64_t unit = i / 32;
  const int mt = static_cast<int>(unit / k_tiles), kt = static_cast<int>(unit % k_tiles);
  uint32_t a[4];
  load_a_fragment(x, M, K, 16 * mt, 16 * kt, lane, a);
  xa[i] = make_uint4(a[0], a[1], a[2], a[3]);
}

__global__ void __launch_bounds__(256, 1) matmul_tiled_kernel(const uint4* __restrict__ xa, int M, int k_tiles,
                                                              const uint4* __restrict__ w, int N,
                                                              const float* __restrict__ bias, float* __restrict__ out) {
  pdl_enter();
  extern __shared__ uint4 smem[];
  uint4* As = smem;                           // [kStages][kTileM][kStageKt][32]
  uint4* Bs = smem + kStages * kStageUnitsA;  // [kStages][kTileN][kStageKt / 2][32]
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / 4, wn = warp % 4;  // warp tile: 4 m-tiles x 4 n-tiles
  const int mt0 = blockIdx.x * kTileM, nt0 = blockIdx.y * kTileN;
  const int kp_count = k_tiles / 2, num_stages = k_tiles / kStageKt;

  auto load_stage = [&](int slot, int ks) {
#pragma unroll
    for (int i = 0; i < kStageUnitsA / 256; ++i) {
      const int c = tid + 256 * i, mt = c / (kStageKt * 32), rem = c % (kStageKt * 32);
      cp_async16(As + slot * kStageUnitsA + c,
                 xa + (static_cast<int64_t>(mt0 + mt) * k_tiles + ks * kStageKt) * 32 + rem);
    }
#pragma unroll
    for (int i = 0; i < kStageUnitsB / 256; ++i) {
      const int c = tid + 256 * i, nt = c / (kStageKt / 2 * 32), rem = c % (kStageKt / 2 * 32);
      cp_async16(Bs + slot * kStageUnitsB + c,
                 w + (static_cast<int64_t>(nt0 + nt) * kp_count + ks * (kStageKt / 2)) * 32 + rem);
    }
  };

  float acc[4][4][4], total[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = total[i][j][r] = 0.f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_stages) load_stage(s, s);
    cp_async_commit();
  }
  for (int ks = 0; ks < num_stages; ++ks) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    if (ks + kStages - 1 < num_stages) load_stage((ks + kStages - 1) % kStages, ks + kStages - 1);
    cp_async_commit();
    const int slot = ks % kStages;
    const uint4* a_s = As + slot * kStageUnitsA;
    const uint2* b_s = reinterpret_cast<const uint2*>(Bs + slot * kStageUnitsB);
#pragma unroll
    for (int kt = 0; kt < kStageKt; ++kt) {
      uint32_t a[4][4];
      uint2 b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint4 v = a_s[((wm * 4 + i) * kStageKt + kt) * 32 + lane];
        a[i][0] = v.x, a[i][1] = v.y, a[i][2] = v.z, a[i][3] = v.w;
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = b_s[(((wn * 4 + j) * (kStageKt / 2) + kt / 2) * 32 + lane) * 2 + kt % 2];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_bf16(acc[i][j], a[i], b[j].x, b[j].y);
    }
    if ((ks + 1) % kStagesPerSegment == 0 || ks + 1 == num_stages) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int r = 0; r < 4; ++r) total[i][j][r] += acc[i][j][r], acc[i][j][r] = 0.f;
    }
  }
  cp_async_wait<0>();

  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = (mt0 + wm * 4 + i) * 16 + g + 8 * (r / 2), col = (nt0 + wn * 4 + j) * 8 + 2 * c + r % 2;
        if (row < M && col < N) out[static_cast<int64_t>(row) * N + col] = finish(total[i][j][r], bias, col);
      }
}

// ---- wgmma (sm_90a): M > 64 when the weight has a core-matrix copy -------------------------
// The same canonical order as every kernel above (bench/results/wgmma-probe.md: a chain of
// wgmma.m64nNk16 gives the bits of the mma.sync.m16n8k16 chain), on Hopper's asynchronous
// warpgroup MMA: a CTA computes a tile of 128 rows x 128 or 192 columns (WgmmaTile), both operands
// from shared memory in core-matrix order (8 rows x 16 bytes, no swizzle; bench/cuda/
// wgmma_rate_probe.cu measured wgmma alone at the tensor peak in that layout): x converted to that
// order (to_core_rows_kernel), the weight from its copy (pack_core_weight). Warp-specialized:
// warpgroup 0 produces 64-k stages into a ring of slots, counted on each slot's `full` mbarrier:
// one thread issues two TMA tensor copies per stage (core_tensor_map: one box per operand) where
// the driver exports the encoder, else (128 columns) its 128 threads issue 16-byte cp.asyncs and
// arrive when theirs land. Warpgroups 1 and 2 consume, each 64 rows with one wgmma.m64n128k16 or
// m64n192k16 per k16 step, and release a
// slot on its `empty` mbarrier once the wgmmas that read it are done (one stage kept in flight).
// Each 512-k segment's chain starts afresh (scale-d 0); segment totals add in order. The tile
// goes out by tensor stores through its last ring slot where the output's rows are 16-byte aligned
// (store_tile_by_tma; H200, same call: prefill 4096 +8.5%, 512 +1%, bench/NOTES-cuda.md
// "Session 17"), else one 8-byte store per lane and row, or for the gated MLP's gate_up
// (store_gated_tile) as the down GEMM's activated bf16 input. Measured (NOTES-cuda.md "Session 9"):
// the same tiles with the consumers issuing the copies and a CTA barrier per stage ran 19-27%
// slower than the cp.async producer, the tensor copies 2-4% faster than it, and one bulk copy per
// 1 KB run 1.6x slower.
constexpr int kWsThreads = 384;  // producer warpgroup + 2 consumer warpgroups
constexpr int kCoreStageUnits = 16 * (2 * kStageKt) * 8;  // uint4 per stage of x: 16 row-blocks x 8 k-blocks
// A tile of 128 rows x kCols output columns (128 or 192): per consumer thread kCols / 2
// accumulators and as many segment totals; per stage 16 KB of x and kCols / 8 row-blocks of the
// weight (16 or 24 KB); a ring of 6 or 5 slots (5 is as deep as 192 columns fit in 227 KB; 7 at 128
// measured no faster than 6, bench/NOTES-cuda.md "Session 16").
// 192 columns: the consumers take 232 registers and the producer keeps 40 (setmaxnreg). Per tile
// the two widths run at the same rate (H200: gate_up at 4096 rows 1462-1486 us at 192 against
// 1479-1508 at 128); what the wider tile changes is how many tiles a launch has, which decides how
// many rounds the resident pairs take (bench/NOTES-cuda.md "Session 16").
template <int kCols>
struct WgmmaTile {
  static_assert(kCols == 128 || kCols == 192);
  static constexpr int kColBlocks = kCols / 8;
  static constexpr int kStages = kCols == 128 ? 6 : 5;
  static constexpr int kWeightUnits = kColBlocks * (2 * kStageKt) * 8;  // uint4 per weight stage
  static constexpr size_t kSmem =
      kStages * static_cast<size_t>(kCoreStageUnits + kWeightUnits) * sizeof(uint4) + 2 * kStages * sizeof(uint64_t);
  static_assert(kSmem <= 227 * 1024, "the sm_90 limit of dynamic shared memory per CTA");
  static constexpr uint32_t kProducerRegs = 40, kConsumerRegs = 232;
  static_assert(kProducerRegs * 128 + kConsumerRegs * 256 <= 65536 / kWsThreads / 8 * 8 * kWsThreads);
};

// x [M, K] f32 -> bf16 [m_pad, k_pad] in the core-matrix order of pack_core_weight (zero-padded):
// a stage's 8 k-blocks of a row-block are 1 KB of contiguous memory. 8 values per thread.
__global__ void to_core_rows_kernel(MatmulInput in, int M, int K, int64_t m_pad, int64_t k_pad,
                                    uint4* __restrict__ xb) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m_pad * k_pad / 8) return;
  const int64_t kb_count = k_pad / 8, core = i / 8, r = (core / kb_count) * 8 + i % 8, k0 = (core % kb_count) * 8;
  uint32_t v[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) v[j] = load_input_pair(in, M, K, static_cast<int>(r), static_cast<int>(k0 + 2 * j));
  xb[i] = make_uint4(v[0], v[1], v[2], v[3]);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void cp_async_arrive(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
#endif

// The epilogue by tensor stores: a consumer warpgroup's 64 rows x kCols columns of the tile go out
// as boxes of 64 x 32 floats (out_tensor_map) through `stage`, 16 KB of the tile's last ring slot
// (the slot is released once the stores have read it), two 8 KB buffers in turn: the warpgroup
// writes a box with the map's 128-byte swizzle (16-byte chunk j of row r at chunk j ^ (r % 8):
// a warp's 8-byte stores take the two wavefronts their 256 bytes need), then its first thread
// issues the store and the warpgroup goes on. Against one 8-byte global store per lane and row
// (64 or 96 instructions per thread, bench/NOTES-cuda.md "Session 16"), the stores drain while the
// next tile's wgmmas run; columns past N and rows past M are clipped by the copy. `barrier`: this
// warpgroup's named barrier.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
template <int kCols>
__device__ __forceinline__ void store_tile_by_tma(const float (&total)[kCols / 2], const float* __restrict__ bias, int N,
                                                  int M, int64_t row0, int col0, const CUtensorMap& out_map,
                                                  void* stage, uint32_t barrier) {
  const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4, cwarp = (threadIdx.x / 32) % 4;
  const bool issuer = threadIdx.x % 128 == 0;
#pragma unroll
  for (int bx = 0; bx < kCols / 32; ++bx) {
    auto* buf = static_cast<uint8_t*>(stage) + (bx % 2) * 8192;
    if (bx >= 2) {  // the store of box bx - 2 has read this buffer
      if (issuer) bulk_wait_read<1>();
      named_barrier_sync<128>(barrier);
    }
#pragma unroll
    for (int nbl = 0; nbl < 4; ++nbl)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = 16 * cwarp + g + 8 * h, nb = 4 * bx + nbl, col = col0 + 8 * nb + 2 * c;
        const int chunk = (2 * nbl + c / 2) ^ (r % 8);
        const float v0 = col < N ? finish(total[4 * nb + 2 * h], bias, col) : 0.f;
        const float v1 = col + 1 < N ? finish(total[4 * nb + 2 * h + 1], bias, col + 1) : 0.f;
        *reinterpret_cast<float2*>(buf + r * 128 + chunk * 16 + 8 * (c % 2)) = make_float2(v0, v1);
      }
    fence_proxy_async();  // the generic-proxy writes, before the tensor copy reads them
    named_barrier_sync<128>(barrier);
    if (issuer) {  // a group per box, empty where it lies past n or M: the waits above count boxes
      if (col0 + 32 * bx < N && row0 < M) tensor_store_2d(&out_map, buf, col0 + 32 * bx, static_cast<int>(row0));
      bulk_commit();
    }
  }
  if (issuer) bulk_wait_read<0>();
  named_barrier_sync<128>(barrier);  // every store has read the slot: it may be refilled
}
#endif

// The gated MLP's gate_up GEMM (gated_mlp): a tile's columns are `h = kCols / 2` gate rows of the
// fused weight and the same h up rows (inter further on), and its epilogue writes act(gate) · up
// straight into the down projection's input: bf16 in core-matrix order (to_core_rows_kernel's
// layout and rounding, from load_input_pair's arithmetic: the same bits as the fp32 gate_up, the
// activation and the conversion), zeros in rows [M, m_pad). xb null: an ordinary GEMM.
// No padding bytes: kernel parameters are compared bytewise as graph keys (step_graph.h).
struct GatedOutput {
  uint32_t* xb = nullptr;  // [m_pad / 8][kb_count][8 rows][4 bf16 pairs]
  int32_t inter = 0;       // the activation's columns (gate_up has 2 · inter rows); a multiple of 64
  int32_t kb_count = 0;    // inter / 8
  int32_t m_pad = 0;       // rows of xb
  int32_t gelu = 0;        // GeluTanh, else SiLU
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// A consumer warpgroup's 64 rows (from row0) of activation columns [j0, j0 + kCols / 2): each lane
// holds gate column j in total[4 nb + 2 h + e] and its up column in the same slot kCols / 16
// blocks on; a warp's store writes one core matrix row-block's 128 bytes.
template <int kCols>
__device__ __forceinline__ void store_gated_tile(const float (&total)[kCols / 2], int M, int64_t row0, int j0,
                                                 const GatedOutput& o) {
  constexpr int kHalfBlocks = kCols / 16;
  const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4, cwarp = (threadIdx.x / 32) % 4;
#pragma unroll
  for (int nb = 0; nb < kHalfBlocks; ++nb)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = row0 + 16 * cwarp + g + 8 * h;
      const int j = j0 + 8 * nb + 2 * c;
      if (row >= o.m_pad || j >= o.inter) continue;
      const int gi = 4 * nb + 2 * h, ui = 4 * (nb + kHalfBlocks) + 2 * h;
      const uint32_t v = row < M ? pack_bf16x2(gated(total[gi], total[ui], o.gelu), gated(total[gi + 1], total[ui + 1], o.gelu))
                                 : 0u;
      o.xb[core_row_index(row, j / 8, o.kb_count) * 4 + c] = v;
    }
}
#endif

// kTma, the producer: one thread's two tensor copies per stage, or 128 threads' cp.asyncs.
// kPair (with kTma): clusters of two CTAs, row blocks 2i and 2i + 1 of one column block, share the
// weight's stages: each CTA's producer loads half of the stage's weight rows and multicasts them
// into both CTAs (x as before, its own), so the pair reads the weight from L2 once instead of twice:
// a quarter less L2 traffic per stage. A slot is free once the consumers of both CTAs released it:
// each consumer warp arrives on its own CTA's `empty` and on the other's, 16 arrivals per phase.
// Same wgmmas on the same bytes: the same bits. H200, same call (session 15): prefill 512 +2.9%,
// 4096 +2.0% against TACHYON_WGMMA_PAIR=0 (one CTA per tile).
template <bool kTma, bool kPair, int kCols>
__global__ void __launch_bounds__(kWsThreads, 1) matmul_wgmma_kernel(const uint4* __restrict__ xb, int M, int k_tiles,
                                                                     const uint4* __restrict__ wc, int N,
                                                                     const float* __restrict__ bias,
                                                                     float* __restrict__ out, int row_pairs,
                                                                     int num_pair_tiles,
                                                                     const __grid_constant__ CUtensorMap x_map,
                                                                     const __grid_constant__ CUtensorMap w_map,
                                                                     const __grid_constant__ CUtensorMap out_map,
                                                                     int store_by_tma, GatedOutput gated_out) {
  static_assert(kTma || !kPair, "the pair multicasts tensor copies");
  static_assert(kTma || kCols == 128, "the cp.async producer copies 128-column stages");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tile = WgmmaTile<kCols>;
  constexpr int kWsStages = Tile::kStages, kColBlocks = Tile::kColBlocks, kWeightUnits = Tile::kWeightUnits;
  extern __shared__ __align__(1024) uint4 smem[];  // 1 KB: the output boxes' 128-byte swizzle
  uint4* As = smem;                                // [kWsStages][16 row-blocks][8 k-blocks][8] (core matrices)
  uint4* Bs = smem + kWsStages * kCoreStageUnits;  // [kWsStages][kColBlocks blocks of 8 output columns][8][8]
  auto* full = reinterpret_cast<uint64_t*>(Bs + kWsStages * kWeightUnits);  // [kWsStages]: stage landed
  uint64_t* empty = full + kWsStages;                                       // [kWsStages]: stage consumed
  // The warpgroup index through a shuffle: provably uniform per warp, so ptxas does not treat the
  // consumers' wgmmas as divergent code (it serialises them there, C7518).
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, wg = __shfl_sync(0xffffffffu, tid / 128, 0);
  // The tiles this CTA computes: its own (row block blockIdx.x, column block blockIdx.y), or with
  // kPair, persistent: cluster c of C walks pair-tiles c, c + C, ... (row-block pairs fastest),
  // taking row block 2 (p % row_pairs) + rank of column block p / row_pairs.
  const int walk_first = kPair ? static_cast<int>(blockIdx.x / 2) : 0;
  const int walk_step = kPair ? static_cast<int>(gridDim.x / 2) : 1, walk_end = kPair ? num_pair_tiles : 1;
  const auto tile_rows = [&](int t) {
    return kPair ? static_cast<int64_t>(2 * (t % row_pairs) + static_cast<int>(blockIdx.x % 2)) * 128
                 : static_cast<int64_t>(blockIdx.x) * 128;
  };
  // A gated tile's weight rows: kColBlocks / 2 row-blocks of gate from tile_columns(t), as many of up
  // inter / 8 blocks on (each CTA of a pair loads one of the two halves).
  const bool gated = gated_out.xb != nullptr;
  const int tile_blocks = gated ? kColBlocks / 2 : kColBlocks;
  const int half_offset = gated ? gated_out.kb_count : kColBlocks / 2;
  const auto tile_columns = [&](int t) {
    return kPair ? static_cast<int64_t>(t / row_pairs) * tile_blocks : static_cast<int64_t>(blockIdx.y) * tile_blocks;
  };
  const int64_t kb_count = 2 * static_cast<int64_t>(k_tiles);  // k-blocks of 8: x rows are kb_count uint4 long
  const int num_stages = k_tiles / kStageKt;
  if (tid == 0) {
    for (int s = 0; s < kWsStages; ++s) mbar_init(&full[s], kTma ? 1 : 128), mbar_init(&empty[s], kPair ? 16 : 8);
    fence_mbarrier_init();
  }
  if constexpr (kPair) cluster_sync();
  else __syncthreads();
  pdl_launch_dependents();
  const uint32_t rank = kPair ? cluster_rank() : 0u, peer = rank ^ 1u;

  // `it` counts the CTA's stages over all its tiles: stage it is slot it % kWsStages, in the
  // slot's phase it / kWsStages.
  if (wg == 0) {
    if constexpr (kCols != 128) setmaxnreg_dec<Tile::kProducerRegs>();
    if constexpr (kTma) {
      if (tid != 0) return;
      const auto wait_empty = [&](int it) {
        const int slot = it % kWsStages;
        mbar_wait(&empty[slot], ((it / kWsStages) - 1) & 1);
      };
      // Stage ks's weight rows of column block nb0 into `slot` (with kPair this CTA's half, multicast).
      const auto load_weight = [&](int slot, int ks, int64_t nb0) {
        if constexpr (kPair) {
          const int half = static_cast<int>(rank);  // this CTA's half of the row-blocks
          tensor_load_3d_multicast(Bs + slot * kWeightUnits + half * kWeightUnits / 2, &w_map, 0, ks * 8,
                                   static_cast<int>(nb0) + half_offset * half, &full[slot], 0b11);
        } else {
          tensor_load_3d(Bs + slot * kWeightUnits, &w_map, 0, ks * 8, static_cast<int>(nb0), &full[slot]);
        }
      };
      // The whole stage lands in this CTA either way (with kPair half the weight's from the other
      // CTA); boxes past the weight's last row-block land as zeros and count all their bytes.
      constexpr uint32_t kStageBytes = (kCoreStageUnits + kWeightUnits) * sizeof(uint4);
      // The first tile's first ring of weight stages goes out before the programmatic wait (weights
      // are constant: pdl_wait's rule), so it streams while the previous kernel ends; x follows
      // the wait. A CTA resides early only where the previous kernel's CTAs have left its SM (it
      // takes a whole SM's registers). H200, four alternating rounds in one call: prefill 512 tokens
      // +0.7%, 4096 flat (bench/NOTES-cuda.md "Session 32").
      const int early = walk_first < walk_end ? min(kWsStages, num_stages) : 0;
      for (int ks = 0; ks < early; ++ks) {
        mbar_arrive_expect_tx(&full[ks], kStageBytes);
        load_weight(ks, ks, tile_columns(walk_first));
      }
      pdl_wait();  // x comes from the previous kernel
      int it = 0;
      for (int t = walk_first; t < walk_end; t += walk_step) {
        const int64_t row0 = tile_rows(t), nb0 = tile_columns(t);
        for (int ks = 0; ks < num_stages; ++ks, ++it) {
          const int slot = it % kWsStages;
          if (it >= early) {
            if (it >= kWsStages) wait_empty(it);
            mbar_arrive_expect_tx(&full[slot], kStageBytes);
            load_weight(slot, ks, nb0);
          }
          tensor_load_3d(As + slot * kCoreStageUnits, &x_map, 0, ks * 8, static_cast<int>(row0 / 8), &full[slot]);
        }
      }
      // kPair: the other CTA's consumers arrive on this CTA's barriers (and its producer writes
      // into this CTA's slots) until both have released every stage; this CTA may exit only then.
      if constexpr (kPair)
        for (const int last = it; it < last + kWsStages; ++it)
          if (it >= kWsStages) wait_empty(it);
    } else {
      pdl_wait();  // x comes from the previous kernel
      const int64_t row0 = tile_rows(0), nb0 = tile_columns(0);
      for (int ks = 0; ks < num_stages; ++ks) {
        const int slot = ks % kWsStages;
        if (ks >= kWsStages) mbar_wait(&empty[slot], ((ks / kWsStages) - 1) & 1);
#pragma unroll
        for (int i = 0; i < kCoreStageUnits / 128; ++i) {
          const int c = tid + 128 * i, blk = c / 64, rem = c % 64;  // 64 uint4: a row-block's 8 k-blocks
          cp_async16(As + slot * kCoreStageUnits + c, xb + ((row0 / 8 + blk) * kb_count + ks * 8) * 8 + rem);
          cp_async16(Bs + slot * kCoreStageUnits + c, wc + ((nb0 + blk) * kb_count + ks * 8) * 8 + rem);
        }
        cp_async_arrive(&full[slot]);
      }
      cp_async_wait<0>();
    }
    return;
  }

  if constexpr (kCols != 128) setmaxnreg_inc<Tile::kConsumerRegs>();
  const int cw = wg - 1, cwarp = warp - 4;  // consumer warpgroup: rows [64 cw, 64 cw + 64) of the tile
  const int g = lane / 4, c = lane % 4;
  const auto release = [&](int slot) {
    mbar_arrive(&empty[slot]);
    if constexpr (kPair) mbar_arrive_remote(&empty[slot], peer);
  };
  int it = 0;
  for (int t = walk_first; t < walk_end; t += walk_step) {
    const int64_t row0 = tile_rows(t), nb0 = tile_columns(t);
    float acc[kCols / 2], total[kCols / 2];
#pragma unroll
    for (int i = 0; i < kCols / 2; ++i) acc[i] = total[i] = 0.f;
    int pending = -1;  // a stage whose wgmmas may still be in flight, its slot not yet released
    for (int ks = 0; ks < num_stages; ++ks, ++it) {
      const int slot = it % kWsStages;
      mbar_wait(&full[slot], (it / kWsStages) & 1);
      // cp.async bytes (generic proxy), read by wgmma (async proxy); tensor copies need no fence
      if constexpr (!kTma) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      const uint4* a_s = As + slot * kCoreStageUnits + cw * 8 * 64;  // this warpgroup's 8 row-blocks
      const uint4* b_s = Bs + slot * kWeightUnits;
      asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
      for (int kt = 0; kt < kStageKt; ++kt) {  // k-blocks 2 kt, 2 kt + 1: 128 B apart; row-blocks 1 KB apart
        const uint64_t a = core_descriptor(a_s + kt * 16, 128, 1024), b = core_descriptor(b_s + kt * 16, 128, 1024);
        // A segment's chain starts from d = A · B (scale-d 0) instead of zeroed accumulators: the
        // segment drain loses its kCols / 2 register clears per thread (H200, same call: prefill
        // +1.5% at 512 and 4096 tokens, bench/NOTES-cuda.md "Session 18"). Same bits: each total
        // starts +0 and adds the segment's sums, so a sum's zero sign cannot reach it.
        const int accumulate = kt > 0 || ks % kStagesPerSegment != 0;
        if constexpr (kCols == 128) wgmma_m64n128k16(acc, a, b, accumulate);
        else wgmma_m64n192k16(acc, a, b, accumulate);
      }
      asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
      if ((ks + 1) % kStagesPerSegment == 0 || ks + 1 == num_stages) {
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        if (lane == 0) {
          if (pending >= 0) release(pending % kWsStages);
          if (!store_by_tma || ks + 1 < num_stages) release(slot);  // else the tile's output passes through it
        }
        pending = -1;
#pragma unroll
        for (int i = 0; i < kCols / 2; ++i) total[i] += acc[i];
      } else {
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");  // this stage stays in flight
        if (lane == 0 && pending >= 0) release(pending % kWsStages);
        pending = it;
      }
    }
    if (gated) {
      store_gated_tile<kCols>(total, M, row0 + 64 * cw, static_cast<int>(nb0 * 8), gated_out);
      continue;
    }
    if (store_by_tma) {
      // Warpgroup 1 stages its boxes in the slot's weight part, which warpgroup 0's last wgmmas
      // read, and warpgroup 0 in the x part, half of which warpgroup 1's read: both must be done.
      named_barrier_sync<256>(3);
      store_tile_by_tma<kCols>(total, bias, N, M, row0 + 64 * cw, static_cast<int>(nb0 * 8), out_map,
                               cw == 0 ? static_cast<void*>(As + (it - 1) % kWsStages * kCoreStageUnits)
                                       : static_cast<void*>(Bs + (it - 1) % kWsStages * kWeightUnits),
                               1 + cw);
      if (lane == 0) release((it - 1) % kWsStages);
      continue;
    }
    // A lane's two adjacent columns of a row as one 8-byte store where every row starts 8-byte
    // aligned (N even, out aligned): 32 contiguous bytes per row and instruction, half the store
    // instructions of one float at a time.
    const bool pairs_out = N % 2 == 0 && reinterpret_cast<uintptr_t>(out) % 8 == 0;
#pragma unroll
    for (int nb = 0; nb < kColBlocks; ++nb)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t row = row0 + 16 * cwarp + g + 8 * h;
        const int col = static_cast<int>((nb0 + nb) * 8) + 2 * c;
        if (row >= M || col >= N) continue;
        const float v0 = finish(total[4 * nb + 2 * h], bias, col);
        if (pairs_out) {
          *reinterpret_cast<float2*>(out + row * N + col) = make_float2(v0, finish(total[4 * nb + 2 * h + 1], bias, col + 1));
        } else {
          out[row * N + col] = v0;
          if (col + 1 < N) out[row * N + col + 1] = finish(total[4 * nb + 2 * h + 1], bias, col + 1);
        }
      }
  }
  if (store_by_tma && tid % 128 == 0) bulk_wait<0>();  // this warpgroup's output written
#else
  __trap();  // built for sm_90 without the arch-specific features: never launched (matmul checks)
#endif
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

template <int MT, int NTW, int U, bool kFragA>
void launch_skinny(const float* x, const uint4* xa, int M, int K, const uint4* w, int N, int kp_count,
                   const float* bias, float* out, cudaStream_t stream) {
  constexpr size_t smem = kSkinnyWarps * MT * NTW * 32 * 4 * sizeof(float);
  static const bool configured = [] {
    TACHYON_CUDA_CHECK(cudaFuncSetAttribute(matmul_skinny_kernel<MT, NTW, U, kFragA>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    return true;
  }();
  (void)configured;
  const int64_t n_tiles = round_up(N, kMmaRowPad) / 8;
  launch(matmul_skinny_kernel<MT, NTW, U, kFragA>, static_cast<unsigned>(n_tiles / NTW), 256, smem, stream, x, xa, M, K,
         w, N, kp_count, bias, out);
}

int64_t a_fragment_m_tiles(int64_t rows) { return round_up(ceil_div(rows, 16), kTileM); }

// A core-order matrix's 3-D tensor map (encode_core_tensor_map): one box of 16 row-blocks is a
// stage of x or of a 128-column weight (box_blocks: the weight's row-blocks per stage, half for a pair).
CUtensorMap core_tensor_map(const void* base, int64_t rows, int64_t kb_count, uint32_t box_blocks = 16) {
  CUtensorMap map{};
  const CUresult result = encode_core_tensor_map(&map, base, rows, kb_count, box_blocks);
  if (result != CUDA_SUCCESS) fail_unsupported("wgmma tensor map (cuTensorMapEncodeTiled result)", result);
  return map;
}

// The wgmma kernels' output [M, N] f32 as a 2-D tensor for their tensor stores (store_tile_by_tma):
// boxes of 64 rows x 32 columns (128 bytes: the 128-byte swizzle's row). Rows must start 16-byte
// aligned (N % 4 == 0, out aligned); `usable` says whether they do (else the map stays empty).
struct OutputTensorMap {
  CUtensorMap map{};
  bool usable = false;
};
OutputTensorMap output_tensor_map(float* out, int M, int N) {
  OutputTensorMap result;
  if (N % 4 != 0 || reinterpret_cast<uintptr_t>(out) % 16 != 0) return result;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(N), static_cast<cuuint64_t>(M)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(N) * sizeof(float)};
  const cuuint32_t box[2] = {32, 64}, element_strides[2] = {1, 1};
  const CUresult status = tensor_map_encoder()(&result.map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, out, dims, strides, box,
                                               element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                               CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS) fail_unsupported("wgmma output tensor map (cuTensorMapEncodeTiled result)", status);
  result.usable = true;
  return result;
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

int decode_variant = kDecodeAuto;
bool splitk_smem_weights = false;

void set_decode_matmul_variant(int variant) {
  decode_variant = variant == kDecodeSplitKShared ? kDecodeSplitK : variant;
  splitk_smem_weights = variant == kDecodeSplitKShared;
}

namespace {

// Auto (measured on the H200, bench/NOTES-cuda.md): at M <= 16 wide matrices with k <= 4096
// (gate_up, LM head) stream best through the long-lived 4-n-tile kernel, the rest through
// split-K; at 17-64 rows wide matrices through the batched kernel (v8), the rest through the
// skinny kernel over A fragments.
// Then (NOTES-cuda.md "Session 9") the streaming kernel: at M = 1 for matrices of 16 MB or more,
// at 2-8 rows for n >= 4096 (session 11, Qwen3-8B shapes, same call: batch 4 736.7 vs 705.4
// tok/s with only n >= 16384 streamed, batch 8 1320.4 vs 1308.9; bench/results/cuda-session11.md).
// TACHYON_STREAM_MIN_N (A/B runs): the narrowest matrix streamed at 2-8 rows.
int64_t stream_min_n() {
  static const int64_t n = [] {
    const char* env = std::getenv("TACHYON_STREAM_MIN_N");
    return env ? std::max<int64_t>(1, std::atoll(env)) : int64_t{4096};
  }();
  return n;
}

int decode_variant_for(int64_t rows, int64_t n, int64_t k) {
  int variant = decode_variant;
  const bool streams = stream_matmul_fits(rows, k);
  if (variant == kDecodeStream && !streams) variant = kDecodeAuto;
  if (variant == kDecodeAuto && streams && n * k >= (int64_t{8} << 20) && (rows == 1 || n >= stream_min_n()))
    variant = kDecodeStream;
  if (variant == kDecodeAuto || variant == kDecodeAutoClassic ||
      (rows <= 16 && (variant == kDecodeBatched || variant == kDecodeBatchedWhole))) {
    if (rows <= 16) variant = n >= 16384 && k <= 4096 ? kDecodeWide : kDecodeSplitK;
    else variant = n >= 16384 ? kDecodeBatched : kDecodeWide;  // 17-64 rows
  }
  return variant;
}

// The shared-memory limit of the wgmma kernels of one width (at 128 the cp.async producer's
// too), raised once (before any launch or occupancy query).
template <int kCols>
void configure_wgmma() {
  static const bool configured = [] {
    const auto raise = [](auto kernel) {
      TACHYON_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(WgmmaTile<kCols>::kSmem)));
    };
    raise(matmul_wgmma_kernel<true, false, kCols>);
    raise(matmul_wgmma_kernel<true, true, kCols>);
    if constexpr (kCols == 128) raise(matmul_wgmma_kernel<false, false, 128>);
    return true;
  }();
  (void)configured;
}

// Clusters of two wgmma CTAs (kPair) that fit on the device at once: the persistent grid.
template <int kCols>
int resident_wgmma_pairs() {
  static const int pairs = [] {
    configure_wgmma<kCols>();
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(2);
    config.blockDim = dim3(kWsThreads);
    config.dynamicSmemBytes = WgmmaTile<kCols>::kSmem;
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = 2, cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
    config.attrs = &cluster;
    config.numAttrs = 1;
    int clusters = 0;
    TACHYON_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, matmul_wgmma_kernel<true, true, kCols>, &config));
    return std::max(clusters, 1);
  }();
  return pairs;
}

// Pair-tiles of 128 rows x kCols columns per resident pair, rounded up: the rounds a persistent
// launch of that width takes.
template <int kCols>
int64_t wgmma_rounds(unsigned row_blocks, int64_t n) {
  return ceil_div(ceil_div(row_blocks, 2) * ceil_div(round_up(n, kMmaRowPad), kCols), resident_wgmma_pairs<kCols>());
}

// The wgmma tile width (set_wgmma_columns; 0: by shape). By shape: 192 columns where their rounds
// cover no more columns than 128's, a 192-column tile's columns counted at wgmma_wide_cost. qkv at
// 512 rows (6144 columns): 64 pair-tiles of 192 in one round against 96 of 128 in two, 44 against
// 57 us; a 4096-wide o or down projection keeps 128 (22 column tiles of 192 leave a third of the
// pairs idle, 32 of 128 fill them: o at 512 rows 42 us at 192, 33 at 128).
int wgmma_columns_setting = [] {
  const char* env = std::getenv("TACHYON_WGMMA_COLS");
  return env ? std::atoi(env) : 0;
}();

// A 192-column tile's time per column against a 128-column tile's (TACHYON_WGMMA_WIDE_COST for A/B
// runs): H200, session 20, one process, gate_up at 4096 rows 1382 / 1410 us at 192 against 1425 /
// 1456 at 128, where 192 takes 32 rounds of the resident pairs and 128 takes 47 (bench/NOTES-cuda.md).
const double wgmma_wide_cost = [] {
  const char* env = std::getenv("TACHYON_WGMMA_WIDE_COST");
  if (!env) return 0.95;
  char* end = nullptr;
  const double cost = std::strtod(env, &end);
  if (end == env || *end != '\0' || !(cost > 0.0 && cost < 4.0))
    fail_unsupported("TACHYON_WGMMA_WIDE_COST (a factor in (0, 4)) in thousandths", static_cast<int64_t>(cost * 1000));
  return cost;
}();

int wgmma_columns(unsigned row_blocks, int64_t n) {
  if (wgmma_columns_setting == 128 || wgmma_columns_setting == 192) return wgmma_columns_setting;
  const double wide = static_cast<double>(wgmma_rounds<192>(row_blocks, n) * 192) * wgmma_wide_cost;
  return wide <= static_cast<double>(wgmma_rounds<128>(row_blocks, n) * 128) ? 192 : 128;
}

// The epilogue by tensor stores where the output's rows allow it (set_wgmma_tma_store;
// TACHYON_WGMMA_TMA_STORE=0: one 8-byte global store per lane and row, for A/B runs).
bool wgmma_tma_store = !env_turned_off("TACHYON_WGMMA_TMA_STORE");

// gated.xb set (gated_mlp; pairs only): the tiles cover gated.inter activation columns, kCols / 2
// per tile, and write the down projection's input instead of `out`.
template <int kCols>
void launch_wgmma(const uint4* xa, int M, int k_tiles, const void* w_core, int64_t n, const float* bias, float* out,
                  unsigned row_blocks, bool pair, cudaStream_t stream, const GatedOutput& gated = {}) {
  configure_wgmma<kCols>();
  const int N = static_cast<int>(n);
  const int64_t kb_count = 2 * static_cast<int64_t>(k_tiles), n_pad = round_up(n, kMmaRowPad);
  const int64_t m_pad = static_cast<int64_t>(row_blocks) * 128;
  const unsigned col_tiles =
      static_cast<unsigned>(gated.xb ? ceil_div(int64_t{gated.inter}, kCols / 2) : ceil_div(n_pad, kCols));
  constexpr uint32_t kBoxBlocks = WgmmaTile<kCols>::kColBlocks;
  const OutputTensorMap out_map = wgmma_tma_store && !gated.xb ? output_tensor_map(out, M, N) : OutputTensorMap{};
  const int store_by_tma = out_map.usable ? 1 : 0;
  if (gated.xb && !pair) fail_unsupported("gated wgmma tiles without pairs (TACHYON_WGMMA_PAIR=0)", 0);
  if (pair) {
    const int row_pairs = static_cast<int>(ceil_div(row_blocks, 2));
    const int pair_tiles = row_pairs * static_cast<int>(col_tiles);
    const unsigned clusters = static_cast<unsigned>(std::min(pair_tiles, resident_wgmma_pairs<kCols>()));
    launch_clustered(matmul_wgmma_kernel<true, true, kCols>, dim3(2 * clusters), kWsThreads, WgmmaTile<kCols>::kSmem,
                     stream, 2u, xa, M, k_tiles, static_cast<const uint4*>(w_core), N, bias, out, row_pairs,
                     pair_tiles, core_tensor_map(xa, m_pad, kb_count),
                     core_tensor_map(w_core, n_pad, kb_count, kBoxBlocks / 2), out_map.map, store_by_tma, gated);
  } else {
    launch(matmul_wgmma_kernel<true, false, kCols>, dim3(row_blocks, col_tiles), kWsThreads, WgmmaTile<kCols>::kSmem,
           stream, xa, M, k_tiles, static_cast<const uint4*>(w_core), N, bias, out, 0, 0,
           core_tensor_map(xa, m_pad, kb_count), core_tensor_map(w_core, n_pad, kb_count, kBoxBlocks), out_map.map,
           store_by_tma, GatedOutput{});
  }
}

bool wgmma_by_tma() {
  static const bool tma = tensor_map_encoder() != nullptr && !env_turned_off("TACHYON_WGMMA_TMA");
  return tma;
}
bool wgmma_pairs() {
  static const bool pair = !env_turned_off("TACHYON_WGMMA_PAIR");
  return pair;
}

// The wgmma kernel on x already in core-matrix order (xa: the row-blocks of M rows, k_tiles · 16
// columns), at the tile width chosen by shape; `gated` as in launch_wgmma.
void launch_wgmma_on_core(const uint4* xa, int M, int k_tiles, const void* w_core, int64_t n, const float* bias,
                          float* out, cudaStream_t stream, const GatedOutput& gated = {}) {
  const unsigned row_blocks = static_cast<unsigned>(a_fragment_m_tiles(M) / kTileM);
  if (!wgmma_by_tma()) {
    configure_wgmma<128>();
    launch(matmul_wgmma_kernel<false, false, 128>, dim3(row_blocks, static_cast<unsigned>(round_up(n, kMmaRowPad) / 128)),
           kWsThreads, WgmmaTile<128>::kSmem, stream, xa, M, k_tiles, static_cast<const uint4*>(w_core),
           static_cast<int>(n), bias, out, 0, 0, CUtensorMap{}, CUtensorMap{}, CUtensorMap{}, 0, GatedOutput{});
  } else if (wgmma_columns(row_blocks, n) == 192) {
    launch_wgmma<192>(xa, M, k_tiles, w_core, n, bias, out, row_blocks, wgmma_pairs(), stream, gated);
  } else {
    launch_wgmma<128>(xa, M, k_tiles, w_core, n, bias, out, row_blocks, wgmma_pairs(), stream, gated);
  }
}

// x [M, K] (or gated_activation's output, `in`) -> xa: bf16 core matrices of the wgmma kernel's
// padded rows (a_fragment_m_tiles) and k_pad columns, zero past M and K.
void to_core_rows(const MatmulInput& in, int M, int K, int64_t k_pad, uint4* xa, cudaStream_t stream) {
  const int64_t m_pad = a_fragment_m_tiles(M) * 16;
  launch(to_core_rows_kernel, static_cast<unsigned>(ceil_div(m_pad * k_pad / 8, 256)), 256, 0, stream, in, M, K, m_pad,
         k_pad, xa);
}

// x [M, K] (or gated_activation's output, `in`) -> bf16 core matrices (the same bytes as its A
// fragments), then the wgmma kernel: M > 64 with the weight's core-matrix copy.
void matmul_wgmma(const MatmulInput& in, int M, int K, int k_tiles, const void* w_core, int64_t n, const float* bias,
                  float* out, void* workspace, cudaStream_t stream) {
  auto* xa = static_cast<uint4*>(workspace);
  to_core_rows(in, M, K, static_cast<int64_t>(k_tiles) * 16, xa, stream);
  launch_wgmma_on_core(xa, M, k_tiles, w_core, n, bias, out, stream);
}

}  // namespace

void set_wgmma_columns(int cols) { wgmma_columns_setting = cols; }
void set_wgmma_tma_store(bool on) { wgmma_tma_store = on; }

int wgmma_columns_for(int64_t rows, int64_t n) {
  return wgmma_columns(static_cast<unsigned>(a_fragment_m_tiles(rows) / kTileM), n);
}

// Rows 17-64 may need both: the A fragments, then (batched kernel with split k) the segment
// sums after them.
size_t matmul_workspace_bytes(int64_t rows, int64_t n, int64_t k) {
  const size_t fragments =
      rows <= 16 ? 0 : static_cast<size_t>(a_fragment_m_tiles(rows) * (round_up(k, kMmaColPad) / 16) * 32) * sizeof(uint4);
  const size_t partial = rows <= 64 ? static_cast<size_t>(ceil_div(round_up(k, kMmaColPad), kSegmentK) * rows *
                                                          round_up(n, kMmaRowPad)) * sizeof(float)
                                    : 0;
  return rows <= 64 ? fragments + partial : fragments;
}

size_t matmul_counter_count(int64_t n) { return static_cast<size_t>(round_up(n, kMmaRowPad) / 8 / kSplitWarps); }

void matmul(const float* x, int64_t rows, const void* w, const void* w_core, int64_t n, int64_t k, const float* bias,
            float* out, void* workspace, unsigned* counters, cudaStream_t stream) {
  if (rows == 0) return;
  const int M = static_cast<int>(rows), N = static_cast<int>(n), K = static_cast<int>(k);
  const auto* wf = static_cast<const uint4*>(w);
  const int k_tiles = static_cast<int>(round_up(k, kMmaColPad) / 16);
  const int variant = decode_variant_for(rows, n, k);
  if (variant == kDecodeStream && stream_matmul_takes(x, rows, k))
    return matmul_stream(x, M, K, wf, N, k_tiles / 2, bias, out, stream);
  if (rows <= 64 && variant == kDecodeSplitK) {
    auto* partial = static_cast<float*>(workspace);
    const int kp = k_tiles / 2;
    if (rows <= 8) {
      if (splitk_smem_weights)
        return launch_splitk<1, true, true>(x, M, K, wf, N, kp, bias, out, partial, counters, stream);
      return launch_splitk<1, true, false>(x, M, K, wf, N, kp, bias, out, partial, counters, stream);
    }
    if (rows <= 16) return launch_splitk<1, false, false>(x, M, K, wf, N, kp, bias, out, partial, counters, stream);
    if (rows <= 32) return launch_splitk<2, false, false>(x, M, K, wf, N, kp, bias, out, partial, counters, stream);
    return launch_splitk<4, false, false>(x, M, K, wf, N, kp, bias, out, partial, counters, stream);
  }
  if (rows <= 16 && variant != kDecodeStaged) {
    const int kp = k_tiles / 2;
    switch (variant) {
      case kDecodeWide: return launch_skinny<1, 4, 4, false>(x, nullptr, M, K, wf, N, kp, bias, out, stream);
      case kDecodeMedium: return launch_skinny<1, 2, 8, false>(x, nullptr, M, K, wf, N, kp, bias, out, stream);
      case kDecodeWideDeep: return launch_skinny<1, 4, 8, false>(x, nullptr, M, K, wf, N, kp, bias, out, stream);
      case kDecodeMediumDeep: return launch_skinny<1, 2, 16, false>(x, nullptr, M, K, wf, N, kp, bias, out, stream);
      default: return launch_skinny<1, 1, 16, false>(x, nullptr, M, K, wf, N, kp, bias, out, stream);
    }
  }
  if (rows <= 16) {
    const bool half = rows <= 8;
    const size_t smem = static_cast<size_t>(kDecodeRoundTiles) * 32 * (half ? 2 : 4) * sizeof(uint32_t);
    auto kernel = half ? matmul_decode_kernel<true> : matmul_decode_kernel<false>;
    static const bool configured = [] {
      TACHYON_CUDA_CHECK(cudaFuncSetAttribute(matmul_decode_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              kDecodeRoundTiles * 32 * 2 * 4));
      TACHYON_CUDA_CHECK(cudaFuncSetAttribute(matmul_decode_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              kDecodeRoundTiles * 32 * 4 * 4));
      return true;
    }();
    (void)configured;
    launch(kernel, static_cast<unsigned>(round_up(n, kMmaRowPad) / 8), 256, smem, stream, x, M, K, wf, N, k_tiles / 2,
           bias, out);
    return;
  }
  if (rows > 64 && w_core) return matmul_wgmma({x}, M, K, k_tiles, w_core, n, bias, out, workspace, stream);
  const int64_t m_tiles = a_fragment_m_tiles(rows);
  auto* xa = static_cast<uint4*>(workspace);
  const dim3 grid(static_cast<unsigned>(m_tiles / kTileM), static_cast<unsigned>(round_up(n, kMmaRowPad) / 128));
  // x -> A fragments once; every CTA then reads 16 bytes per lane per (m-tile, k-tile).
  const int64_t units = m_tiles * k_tiles * 32;
  launch(to_a_fragments_kernel, static_cast<unsigned>(ceil_div(units, 256)), 256, 0, stream, x, M, K, m_tiles, k_tiles,
         xa);
  if (rows <= 64 && variant >= kDecodeBatched) {
    auto* partial = reinterpret_cast<float*>(xa + units);
    const int splits = variant == kDecodeBatchedWhole ? 1 : 0;
    if (rows <= 32)
      return launch_batched<2>(xa, M, k_tiles, k_tiles, wf, N, k_tiles / 2, bias, out, partial, counters, splits, stream);
    return launch_batched<4>(xa, M, k_tiles, k_tiles, wf, N, k_tiles / 2, bias, out, partial, counters, splits, stream);
  }
  if (rows <= 32) return launch_skinny<2, 2, 8, true>(x, xa, M, K, wf, N, k_tiles / 2, bias, out, stream);
  if (rows <= 48) return launch_skinny<3, 4, 4, true>(x, xa, M, K, wf, N, k_tiles / 2, bias, out, stream);
  if (rows <= 64) return launch_skinny<4, 4, 4, true>(x, xa, M, K, wf, N, k_tiles / 2, bias, out, stream);
  static const bool configured = [] {
    TACHYON_CUDA_CHECK(cudaFuncSetAttribute(matmul_tiled_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(kTiledSmem)));
    return true;
  }();
  (void)configured;
  launch(matmul_tiled_kernel, grid, 256, kTiledSmem, stream, xa, M, k_tiles, wf, N, bias, out);
}

bool matmul_streams(int64_t rows, int64_t n, int64_t k) {
  return rows > 0 && decode_variant_for(rows, n, k) == kDecodeStream;
}

void matmul_after_add_norm(const StreamAddNorm& norm, int64_t rows, const void* w, int64_t n, int64_t k,
                           const float* bias, float* out, cudaStream_t stream) {
  const int k_tiles = static_cast<int>(round_up(k, kMmaColPad) / 16);
  matmul_stream(nullptr, static_cast<int>(rows), static_cast<int>(k), static_cast<const uint4*>(w),
                static_cast<int>(n), k_tiles / 2, bias, out, stream, norm);
}

// Not at decode: staging the activation in the streaming kernel measured 42.7 us for the 8B down
// projection against 31.0 + 4.4 us for the two launches, and batch-1 decode 187 against 206 tok/s
// (NOTES-cuda.md "Session 9": the activation kernel's launch is hidden while the matmul fills its
// ring; the fused kernel's staging is not).
bool matmul_gated_fuses(int64_t rows, int64_t n, int64_t k, bool has_core) { return rows > 64 && has_core; }

void matmul_gated(const float* gate_up, bool gelu, int64_t rows, const void* w_core, int64_t n, int64_t k,
                  const float* bias, float* out, void* workspace, cudaStream_t stream) {
  const MatmulInput in{nullptr, gate_up, gelu ? 1 : 0};
  const int M = static_cast<int>(rows), K = static_cast<int>(k);
  const int k_tiles = static_cast<int>(round_up(k, kMmaColPad) / 16);
  if (!matmul_gated_fuses(rows, n, k, w_core != nullptr)) fail_unsupported("matmul_gated rows (needs > 64)", rows);
  matmul_wgmma(in, M, K, k_tiles, w_core, n, bias, out, workspace, stream);
}

int64_t matmul_core_rows(int64_t rows) { return a_fragment_m_tiles(rows) * 16; }

bool matmul_takes_core_input(int64_t rows, int64_t k, bool has_core) { return rows > 64 && has_core && k % 64 == 0; }

void matmul_core_input(const void* xa, int64_t rows, int64_t k, const void* w_core, int64_t n, const float* bias,
                       float* out, cudaStream_t stream) {
  if (!matmul_takes_core_input(rows, k, w_core != nullptr)) fail_unsupported("matmul_core_input rows", rows);
  launch_wgmma_on_core(static_cast<const uint4*>(xa), static_cast<int>(rows), static_cast<int>(k / 16), w_core, n,
                       bias, out, stream);
}

bool gated_mlp_fuses(int64_t rows, int64_t inter, bool has_cores) {
  return rows > 64 && has_cores && inter % 64 == 0 && wgmma_by_tma() && wgmma_pairs();
}

size_t gated_mlp_workspace_bytes(int64_t rows, int64_t hidden, int64_t inter) {
  return static_cast<size_t>(matmul_core_rows(rows) * (round_up(hidden, kMmaColPad) + inter)) * 2;
}

void gated_mlp(const float* x, bool gelu, int64_t rows, const void* gate_up_core, int64_t hidden, int64_t inter,
               const void* down_core, int64_t n, float* out, void* workspace, cudaStream_t stream) {
  const int64_t k_pad = round_up(hidden, kMmaColPad);
  to_core_rows(MatmulInput{x}, static_cast<int>(rows), static_cast<int>(hidden), k_pad, static_cast<uint4*>(workspace),
               stream);
  gated_mlp_core_input(workspace, gelu, rows, gate_up_core, k_pad, inter, down_core, n, out, stream);
}

void gated_mlp_core_input(void* workspace, bool gelu, int64_t rows, const void* gate_up_core, int64_t hidden,
                          int64_t inter, const void* down_core, int64_t n, float* out, cudaStream_t stream) {
  if (!gated_mlp_fuses(rows, inter, gate_up_core && down_core) || hidden % kMmaColPad != 0)
    fail_unsupported("gated_mlp rows", rows);
  const int M = static_cast<int>(rows);
  const int64_t m_pad = matmul_core_rows(rows);
  const auto* xa = static_cast<const uint4*>(workspace);
  uint4* xb = static_cast<uint4*>(workspace) + m_pad * hidden / 8;  // the down GEMM's input, written by the gate_up tiles
  GatedOutput gated;
  gated.xb = reinterpret_cast<uint32_t*>(xb);
  gated.inter = static_cast<int32_t>(inter), gated.kb_count = static_cast<int32_t>(inter / 8);
  gated.m_pad = static_cast<int32_t>(m_pad), gated.gelu = gelu ? 1 : 0;
  launch_wgmma_on_core(xa, M, static_cast<int>(hidden / 16), gate_up_core, 2 * inter, nullptr, nullptr, stream, gated);
  launch_wgmma_on_core(xb, M, static_cast<int>(inter / 16), down_core, n, nullptr, out, stream);
}

}  // namespace tachyon::kernels::cuda
