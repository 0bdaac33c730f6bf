// The matmul kernels of decode and verification rows (M <= 64; matmul.cuh says which runs when):
// skinny, staged decode, split-K and batched, all in the canonical order of common.cuh. Four
// kernel families in one file (~530 lines) because they share the segment constants and the
// split-K fix-up, and the kernel lab (set_decode_matmul_variant) switches among all of them.
#include "kernels/cuda/matmul_decode.cuh"

namespace tachyon::kernels::cuda {
namespace {

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
constexpr size_t batched_smem_bytes(int MT) {
  return static_cast<size_t>(MT) * 2 * kPairsPerSegment * 32 * sizeof(uint4) +
         static_cast<size_t>(kSplitWarps) * kBatchedNtw * MT * 32 * sizeof(float4);
}
template <int MT>
void launch_batched(const uint4* xa, int M, int k_tiles, int xa_k_stride, const uint4* w, int N, int kp_count,
                    const float* bias, float* out, float* partial, unsigned* counters, int splits, cudaStream_t stream) {
  constexpr size_t smem = batched_smem_bytes(MT);
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

}  // namespace

bool matmul_decode_from_x(int variant, bool splitk_smem_weights, const float* x, int M, int K, const uint4* w, int N,
                          int kp_count, const float* bias, float* out, float* partial, unsigned* counters,
                          cudaStream_t stream) {
  const int kp = kp_count;
  const auto* wf = w;
  if (M <= 64 && variant == kDecodeSplitK) {
    if (M <= 8) {
      if (splitk_smem_weights) launch_splitk<1, true, true>(x, M, K, wf, N, kp, bias, out, partial, counters, stream);
      else launch_splitk<1, true, false>(x, M, K, wf, N, kp, bias, out, partial, counters, stream);
    } else if (M <= 16) {
      launch_splitk<1, false, false>(x, M, K, wf, N, kp, bias, out, partial, counters, stream);
    } else if (M <= 32) {
      launch_splitk<2, false, false>(x, M, K, wf, N, kp, bias, out, partial, counters, stream);
    } else {
      launch_splitk<4, false, false>(x, M, K, wf, N, kp, bias, out, partial, counters, stream);
    }
    return true;
  }
  if (M <= 16 && variant != kDecodeStaged) {
    switch (variant) {
      case kDecodeWide: launch_skinny<1, 4, 4, false>(x, nullptr, M, K, wf, N, kp, bias, out, stream); break;
      case kDecodeMedium: launch_skinny<1, 2, 8, false>(x, nullptr, M, K, wf, N, kp, bias, out, stream); break;
      case kDecodeWideDeep: launch_skinny<1, 4, 8, false>(x, nullptr, M, K, wf, N, kp, bias, out, stream); break;
      case kDecodeMediumDeep: launch_skinny<1, 2, 16, false>(x, nullptr, M, K, wf, N, kp, bias, out, stream); break;
      default: launch_skinny<1, 1, 16, false>(x, nullptr, M, K, wf, N, kp, bias, out, stream); break;
    }
    return true;
  }
  if (M <= 16) {
    const bool half = M <= 8;
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
    launch(kernel, static_cast<unsigned>(round_up(N, kMmaRowPad) / 8), 256, smem, stream, x, M, K, wf, N, kp, bias, out);
    return true;
  }
  return false;
}

void matmul_decode_from_fragments(int variant, const float* x, const uint4* xa, int M, int K, int k_tiles,
                                  const uint4* w, int N, const float* bias, float* out, float* partial,
                                  unsigned* counters, cudaStream_t stream) {
  const auto* wf = w;
  // 33-64 rows stage 128 KB: more than sm_86/89's 99 KB per block, where the skinny kernel serves.
  if (variant >= kDecodeBatched && (M <= 32 || batched_smem_bytes(4) <= device_arch().smem_per_block)) {
    const int splits = variant == kDecodeBatchedWhole ? 1 : 0;
    if (M <= 32)
      return launch_batched<2>(xa, M, k_tiles, k_tiles, wf, N, k_tiles / 2, bias, out, partial, counters, splits, stream);
    return launch_batched<4>(xa, M, k_tiles, k_tiles, wf, N, k_tiles / 2, bias, out, partial, counters, splits, stream);
  }
  if (M <= 32) return launch_skinny<2, 2, 8, true>(x, xa, M, K, wf, N, k_tiles / 2, bias, out, stream);
  if (M <= 48) return launch_skinny<3, 4, 4, true>(x, xa, M, K, wf, N, k_tiles / 2, bias, out, stream);
  launch_skinny<4, 4, 4, true>(x, xa, M, K, wf, N, k_tiles / 2, bias, out, stream);
}

}  // namespace tachyon::kernels::cuda
