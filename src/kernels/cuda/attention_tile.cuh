// What the two query-tile attention kernels (attention.cu on mma.sync, attention_wgmma.cu on
// wgmma) share around the chunk arithmetic: which (row, head) pairs a CTA serves, its rows' key
// windows, and the finished rows' output. A pair p of a tile is row p / hg, head h_begin + p % hg.
#pragma once

#include <cstdint>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/attention_chunk.cuh"

namespace tachyon::kernels::cuda {

#ifdef __CUDACC__
// CTA (query tile, KV head, head chunk): the tiles run in reverse order (a sequence's last tiles
// have the most keys and start first).
struct TilePairs {
  QueryTile tile;
  int kvh, h_begin, hg, num_pairs;
};
__device__ __forceinline__ TilePairs tile_pairs_of_cta(const QueryTile* tiles, const AttentionShape& s,
                                                      int heads_per_chunk) {
  TilePairs t;
  t.tile = tiles[gridDim.x - 1 - blockIdx.x];
  const int group = s.num_heads / s.num_kv_heads, chunks = (group + heads_per_chunk - 1) / heads_per_chunk;
  t.kvh = blockIdx.y / chunks;
  const int chunk = blockIdx.y % chunks;
  t.h_begin = t.kvh * group + chunk * heads_per_chunk;
  t.hg = min(heads_per_chunk, group - chunk * heads_per_chunk);
  t.num_pairs = t.tile.num_rows * t.hg;
  return t;
}

// The tile's rows' positions and window starts into pos_s / lo_s (a CTA barrier follows), and
// the keys any of them reads, [kmin, kmax].
__device__ __forceinline__ void tile_key_windows(const DeviceAttentionMeta& meta, const AttentionShape& s,
                                                 const QueryTile& tile, int32_t* pos_s, int32_t* lo_s, int& kmin,
                                                 int& kmax) {
  if (threadIdx.x < tile.num_rows) {
    const int32_t pos = meta.positions[tile.row0 + threadIdx.x];
    pos_s[threadIdx.x] = pos;
    lo_s[threadIdx.x] = s.sliding_window > 0 ? max(0, pos - s.sliding_window + 1) : 0;
  }
  __syncthreads();
  kmin = lo_s[0], kmax = pos_s[0];
  for (int i = 1; i < tile.num_rows; ++i) kmin = min(kmin, lo_s[i]), kmax = max(kmax, pos_s[i]);
}

// The key windows of the lane's two pairs (pair0 + g, pair0 + g + 8); padding pairs get none.
__device__ __forceinline__ void lane_key_windows(const TilePairs& t, int pair0, const int32_t* pos_s,
                                                 const int32_t* lo_s, int32_t (&row_lo)[2], int32_t (&row_pos)[2]) {
  const int g = threadIdx.x % 32 / 4;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int p = pair0 + g + 8 * i;
    row_lo[i] = p < t.num_pairs ? lo_s[p / t.hg] : 1;
    row_pos[i] = p < t.num_pairs ? pos_s[p / t.hg] : 0;
  }
}

// Sinks and normalisation (finish_factors) of the lane's two pairs, then their d tiles
// [nt_begin, nt_end) of A (the mma accumulator layout: lane 4g + t holds columns 2t, 2t + 1 of
// rows g and g + 8 in A[j]) to out.
template <int DT>
__device__ __forceinline__ void write_tile_rows(const TilePairs& t, int pair0, const AttentionShape& s, int D,
                                                int nt_begin, int nt_end, const float (&M)[2], const float (&L)[2],
                                                const float (&A)[DT][4], float* __restrict__ out) {
  const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int p = pair0 + g + 8 * i;
    if (p >= t.num_pairs) continue;
    const int r = t.tile.row0 + p / t.hg, h = t.h_begin + p % t.hg;
    float rescale, inv;
    finish_factors(M[i], L[i], s.sinks, h, rescale, inv);
    float* o = out + (static_cast<int64_t>(r) * s.num_heads + h) * D;
#pragma unroll
    for (int j = 0; j < DT; ++j) {
      const int nt = nt_begin + j;
      if (nt >= nt_end) break;
      *reinterpret_cast<float2*>(o + 8 * nt + 2 * c) =
          make_float2(A[j][2 * i] * rescale * inv, A[j][2 * i + 1] * rescale * inv);
    }
  }
}
#endif

}  // namespace tachyon::kernels::cuda
