// The ring protocol of the streaming decode matmuls (M <= 8), shared by the bf16 kernels
// (matmul_stream.cu) and the quantized one (matmul_quant_stream.cu): one CTA per SM, a producer
// lane bulk-copies units of 8 KB of a weight's n-tiles into ring slots counted by mbarriers, 8
// consumer warps take the units round-robin (unit u: slot u % slots, warp u % 8), post by post the
// producer tells them which n-tile comes next, and per round of 8 n-tiles warp w adds n-tile w's
// segment sums in segment order (the canonical order of common.cuh). What differs between the
// kernels is a unit's contents and how a consumer turns it into B fragments. Internal to
// src/kernels/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/common.cuh"

namespace tachyon::kernels::cuda {

constexpr int kStreamUnitBytes = 8 * 1024;  // one bulk copy of weight bytes (bf16: one (n-tile, segment))
constexpr int kStreamSlots = 16;            // 128 KB of weights in flight per SM (the bf16 default)
constexpr int kStreamConsumerWarps = 8;     // take the units round-robin; warp 8 produces
constexpr int kStreamThreads = (kStreamConsumerWarps + 1) * 32;
// Dynamic shared memory: the SM's 227 KB per CTA less the fused norm's static arrays (< 1 KB).
constexpr size_t kStreamSmemLimit = 226 * 1024;
// The producer posts each n-tile it streams (its j-th: entry j % kTileIdSlots) for the consumers,
// who read a round's entries at its end; it runs at most a ring (<= 24 units) and a round ahead of
// the slowest of them, so 64 entries are never overwritten unread.
constexpr int kTileIdSlots = 64;

// x rows in shared memory: bf16, padded by 16 bytes so the 8 rows of an A fragment fall in
// different banks.
__host__ __device__ inline int x_row_words(int64_t k) { return static_cast<int>(round_up(k, kMmaColPad) / 2 + 4); }

// The n-tiles a CTA streams, in order. Static (`taken` null): CTA c's contiguous run
// [c·T/G, (c+1)·T/G). Taken: n-tiles c, c + G, ... for the first `first_static` of them (what fills
// the ring before the programmatic wait), then each next n-tile from a device counter
// (taken[0]), so a CTA on an SM that streams faster takes more of them and the CTAs end together:
// with fixed shares, CTAs of the same share ended 4-7 us apart in a 48 us matmul (per-SM
// bandwidth, docs/perf/cuda.md). The counter is read only after the wait, so the
// kernel before this one on the stream has completed, and reset by the last CTA to finish taking
// (taken[1] counts them): zero again before the next kernel's wait returns. A row's bits do not
// depend on which CTA computes its n-tile.
struct TileSchedule {
  unsigned* taken = nullptr;  // [2], zero between launches (stream_tile_counters)
  int first_static = 0;
};

// The stream's pair of taken-n-tile counters (matmul_stream.cu; null past 64 streams: static shares).
unsigned* stream_tile_counters(cudaStream_t stream);
// The n-tiles per CTA of the ring's first fill (in units at least the ring's slots) where there
// are more n-tiles than those, else 0: fixed shares.
int first_static_tiles(int n_tiles, int grid, int units_per_tile, int slots);
TileSchedule tile_schedule(int n_tiles, int grid, int units_per_tile, int slots, cudaStream_t stream);

#ifdef __CUDACC__
// The ring's start, by every thread of the CTA: each slot's full and empty barriers armed for one
// arrival and made visible to the bulk copies, then the next kernel may be scheduled (it waits for
// this one's completion before it reads the output).
__device__ __forceinline__ void start_ring(uint64_t* full, uint64_t* empty, int slots) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < slots; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], 1);
    fence_mbarrier_init();
  }
  __syncthreads();
  pdl_launch_dependents();
}

// Entry j of the producer's posts: its j-th n-tile (-1 past the last) tagged with j, so that a
// consumer can tell it from an older post in the same entry.
__device__ __forceinline__ void post_tile(uint64_t* ids, int j, int tile) {
  *reinterpret_cast<volatile uint64_t*>(ids + j % kTileIdSlots) =
      (static_cast<uint64_t>(j) << 32) | static_cast<uint32_t>(tile);
}
__device__ __forceinline__ int posted_tile(const uint64_t* ids, int j) {
  const volatile uint64_t* entry = ids + j % kTileIdSlots;
  uint64_t v;
  while (static_cast<uint32_t>((v = *entry) >> 32) != static_cast<uint32_t>(j)) {
  }
  return static_cast<int>(static_cast<uint32_t>(v));
}

#if !TACHYON_PRE_HOPPER_DEVICE_CODE
// The producer lane's walk over its CTA's n-tiles (TileSchedule): stream_tile(j, tile) issues the
// j-th n-tile's units (posting it with post_tile before the first unit's arrive); then -1 is posted
// up to the end of the round after the last n-tile, so every consumer learns where the n-tiles
// end from a post it waits for. Weights are constant, so the static n-tiles stream before
// pdl_wait (during the previous kernel); the counter is read after it.
template <typename StreamTile>
__device__ __forceinline__ void produce_stream_tiles(const TileSchedule& schedule, int n_tiles, uint64_t* ids,
                                                     StreamTile&& stream_tile) {
  int j = 0;
  if (!schedule.taken) {
    const int tile_end = static_cast<int>(static_cast<int64_t>(blockIdx.x + 1) * n_tiles / gridDim.x);
    for (int tile = static_cast<int>(static_cast<int64_t>(blockIdx.x) * n_tiles / gridDim.x); tile < tile_end; ++tile)
      stream_tile(j++, tile);
  } else {
    for (int s = 0; s < schedule.first_static; ++s) stream_tile(j++, static_cast<int>(blockIdx.x + s * gridDim.x));
    pdl_wait();
    const int first_taken = schedule.first_static * gridDim.x;
    // One n-tile taken ahead: the atomic's round trip overlaps the current n-tile's issue.
    int next = first_taken + static_cast<int>(atomicAdd(&schedule.taken[0], 1u));
    while (next < n_tiles) {
      const int tile = next;
      next = first_taken + static_cast<int>(atomicAdd(&schedule.taken[0], 1u));
      stream_tile(j++, tile);
    }
    if (atomicAdd(&schedule.taken[1], 1u) == gridDim.x - 1) schedule.taken[0] = 0u, schedule.taken[1] = 0u;
  }
  const int round_end = (j / kStreamConsumerWarps + 1) * kStreamConsumerWarps;
  for (int e = j; e < round_end; ++e) post_tile(ids, e, -1);
}
#endif

// x [M, K] (K % 4 == 0, 16-byte aligned) as bf16 pairs, zero past K: each thread issues up to 8
// float4 loads before its first conversion (one element pair per loop trip waited for each load
// in turn: up to 12 round trips to L2 on the step's critical path, after the programmatic wait).
__device__ __forceinline__ void stage_rows_batched(const float* __restrict__ x, int M, int K, uint32_t* xs,
                                                   int row_words, int pair_count) {
  constexpr int kBatch = 8, kThreads = kStreamConsumerWarps * 32;
  const int row_vecs = pair_count / 2, total = M * row_vecs;  // float4 slots of the padded rows
  for (int base = threadIdx.x; base < total; base += kBatch * kThreads) {
    float4 v[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = base + j * kThreads, r = i / row_vecs, c = i - r * row_vecs;
      v[j] = i < total && c < K / 4 ? reinterpret_cast<const float4*>(x + static_cast<int64_t>(r) * K)[c]
                                    : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = base + j * kThreads, r = i / row_vecs, c = i - r * row_vecs;
      if (i < total)
        *reinterpret_cast<uint2*>(xs + r * row_words + 2 * c) =
            make_uint2(pack_bf16x2(v[j].x, v[j].y), pack_bf16x2(v[j].z, v[j].w));
    }
  }
}

// x [M, K] as bf16 pairs in shared memory rows of row_words (zero past K), by the consumer warps:
// batched float4 loads where x allows them, else pair by pair.
__device__ __forceinline__ void stage_rows(const float* __restrict__ x, int M, int K, uint32_t* xs, int row_words,
                                           int pair_count) {
  if (K % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0) {
    stage_rows_batched(x, M, K, xs, row_words, pair_count);
  } else {
    for (int i = threadIdx.x; i < M * pair_count; i += kStreamConsumerWarps * 32) {
      const int r = i / pair_count, p = i % pair_count;
      xs[r * row_words + p] = load_x_pair(x, M, K, r, 2 * p);
    }
  }
}

// Lane (g, c) of a consumer warp: its two columns of row g of an n-tile, the segment sums added in
// segment order (the canonical order) from `tile_sums` ([segments][M rows x 4 lanes]).
__device__ __forceinline__ float2 tile_total(const float2* tile_sums, int num_segments, int M) {
  const int lane = threadIdx.x % 32;
  float2 total = make_float2(0.f, 0.f);
  for (int seg = 0; seg < num_segments; ++seg) {
    const float2 v = tile_sums[seg * M * 4 + lane];
    total.x += v.x, total.y += v.y;
  }
  return total;
}

// Lane (g, c) of a consumer warp adds n-tile `tile`'s segment sums of row g (tile_total), scales
// them (Dense I8's row scales; null: none) and writes its two columns.
__device__ __forceinline__ void write_tile_totals(const float2* tile_sums, int num_segments, int M, int tile, int N,
                                                  const float* __restrict__ bias, float* __restrict__ out,
                                                  const float* __restrict__ col_scales = nullptr) {
  const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  if (g >= M) return;
  float2 total = tile_total(tile_sums, num_segments, M);
  const int col = tile * 8 + 2 * c;
  if (col_scales) total.x = __fmul_rn(total.x, col_scales[col]), total.y = __fmul_rn(total.y, col_scales[col + 1]);
  if (col < N) out[static_cast<int64_t>(g) * N + col] = total.x + (bias ? bias[col] : 0.f);
  if (col + 1 < N) out[static_cast<int64_t>(g) * N + col + 1] = total.y + (bias ? bias[col + 1] : 0.f);
}
#endif  // __CUDACC__

}  // namespace tachyon::kernels::cuda
