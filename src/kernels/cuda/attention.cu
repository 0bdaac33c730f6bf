#include "kernels/cuda/attention.cuh"

#include <algorithm>
#include <cmath>

#include "kernels/cuda/common.cuh"

namespace tachyon::kernels::cuda {
namespace {

constexpr int kMaxPairs = 16;    // (row, head) pairs per CTA
constexpr int kWarps = 4;
constexpr int kPairsPerWarp = kMaxPairs / kWarps;
constexpr int kKeyTile = 32;

__device__ __forceinline__ int64_t kv_slot(const int32_t* table, int32_t position, int block_size) {
  return static_cast<int64_t>(table[position / block_size]) * block_size + position % block_size;
}

// The canonical reduction of one (row, head) over its keys, shared by both kernels so that a
// row's bits do not depend on which kernel ran it (decode vs query tiles): keys are cut into
// chunks of kChunkKeys aligned to absolute positions; inside a chunk an online softmax runs
// over its two 32-key sub-tiles; chunk states are merged in chunk order by merge_state.
constexpr int kChunkKeys = 64;

template <int DPL>
__device__ __forceinline__ void merge_state(float& M, float& L, float (&A)[DPL], float m, float l,
                                            const float (&a)[DPL]) {
  const float mn = fmaxf(M, m);
  const float fo = expf(M - mn), fn = expf(m - mn);  // M = -inf (nothing merged yet): fo = 0
  L = fmaf(l, fn, L * fo);
#pragma unroll
  for (int i = 0; i < DPL; ++i) A[i] = fmaf(a[i], fn, A[i] * fo);
  M = mn;
}

// One 32-key sub-tile of a chain: lane `lane` holds key j0 + lane's score (valid keys only).
template <int DPL>
__device__ __forceinline__ void chain_scores_update(float& m, float& l, float (&acc)[DPL], float score, bool valid,
                                                    float& pj) {
  const float m_new = fmaxf(m, warp_max(score));
  const float alpha = expf(m - m_new);
  pj = valid ? expf(score - m_new) : 0.f;
  l = l * alpha + warp_sum(pj);
#pragma unroll
  for (int i = 0; i < DPL; ++i) acc[i] *= alpha;
  m = m_new;
}

// Sinks, then normalisation: the final step of both kernels.
template <int DPL>
__device__ __forceinline__ void finish_row(float M, float L, float (&A)[DPL], const float* sinks, int h) {
  float rescale = 1.f;
  if (sinks) {
    const float sink = sinks[h], m_f = fmaxf(M, sink);
    rescale = expf(M - m_f);
    L = L * rescale + expf(sink - m_f);
  }
  const float inv = 1.f / L;
#pragma unroll
  for (int i = 0; i < DPL; ++i) A[i] = A[i] * rescale * inv;
}

template <int DPL>  // head_dim <= 32 * DPL
__global__ void __launch_bounds__(128) attention_kernel(const float* __restrict__ q, DeviceAttentionMeta meta,
                                                        const QueryTile* __restrict__ tiles,
                                                        const float* __restrict__ k_cache,
                                                        const float* __restrict__ v_cache, AttentionShape s,
                                                        int heads_per_chunk, float* __restrict__ out) {
  extern __shared__ float smem[];
  const int D = s.head_dim, width = s.num_kv_heads * D;
  float* qs = smem;                         // [kMaxPairs][D]
  float* ks = qs + kMaxPairs * D;           // [kKeyTile][D + 1] (padded: lane j reads row j)
  float* vs = ks + kKeyTile * (D + 1);      // [kKeyTile][D]
  __shared__ int32_t pos_s[kMaxPairs], lo_s[kMaxPairs];

  const QueryTile tile = tiles[blockIdx.x];
  const int group = s.num_heads / s.num_kv_heads;
  const int chunks = (group + heads_per_chunk - 1) / heads_per_chunk;
  const int kvh = blockIdx.y / chunks, chunk = blockIdx.y % chunks;
  const int h_begin = kvh * group + chunk * heads_per_chunk;
  const int hg = min(heads_per_chunk, group - chunk * heads_per_chunk);
  const int num_pairs = tile.num_rows * hg;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  for (int i = tid; i < num_pairs * D; i += blockDim.x) {
    const int p = i / D, d = i % D;
    const int r = tile.row0 + p / hg, h = h_begin + p % hg;
    qs[i] = q[(static_cast<int64_t>(r) * s.num_heads + h) * D + d];
  }
  if (tid < tile.num_rows) {
    const int32_t pos = meta.positions[tile.row0 + tid];
    pos_s[tid] = pos;
    lo_s[tid] = s.sliding_window > 0 ? max(0, pos - s.sliding_window + 1) : 0;
  }
  __syncthreads();
  int kmin = lo_s[0], kmax = pos_s[0];
  for (int i = 1; i < tile.num_rows; ++i) kmin = min(kmin, lo_s[i]), kmax = max(kmax, pos_s[i]);
  const int32_t* table = meta.block_tables + meta.block_table_offsets[meta.row_seq[tile.row0]];

  // Per pair: the current chunk's chain (m, l, acc) and the merged total (M, L, A).
  float m[kPairsPerWarp], l[kPairsPerWarp], acc[kPairsPerWarp][DPL];
  float M[kPairsPerWarp], L[kPairsPerWarp], A[kPairsPerWarp][DPL];
  bool active[kPairsPerWarp];
#pragma unroll
  for (int pp = 0; pp < kPairsPerWarp; ++pp) {
    m[pp] = M[pp] = -INFINITY, l[pp] = L[pp] = 0.f, active[pp] = false;
#pragma unroll
    for (int i = 0; i < DPL; ++i) acc[pp][i] = A[pp][i] = 0.f;
  }

  for (int j0 = kmin / kKeyTile * kKeyTile; j0 <= kmax; j0 += kKeyTile) {
    for (int i = tid; i < kKeyTile * D; i += blockDim.x) {
      const int jj = i / D, d = i % D, j = j0 + jj;
      if (j < kmin || j > kmax) continue;
      const int64_t src = kv_slot(table, j, s.block_size) * width + static_cast<int64_t>(kvh) * D + d;
      ks[jj * (D + 1) + d] = k_cache[src];
      vs[jj * D + d] = v_cache[src];
    }
    __syncthreads();
#pragma unroll
    for (int pp = 0; pp < kPairsPerWarp; ++pp) {
      const int p = warp + kWarps * pp;
      if (p >= num_pairs) continue;
      const int rl = p / hg;
      const int js = max(lo_s[rl], j0), je = min(pos_s[rl], j0 + kKeyTile - 1);
      if (js <= je) {
        const int j = j0 + lane;
        const bool valid = j >= js && j <= je;
        float score = -INFINITY;
        if (valid) {
          const float* qp = qs + p * D;
          const float* kj = ks + lane * (D + 1);
          float dot = 0.f;
          for (int d = 0; d < D; ++d) dot = fmaf(qp[d], kj[d], dot);
          score = dot * s.scale;
          if (s.softcap > 0.f) score = s.softcap * tanhf(score / s.softcap);
        }
        float pj;
        chain_scores_update(m[pp], l[pp], acc[pp], score, valid, pj);
        for (int jj = js - j0; jj <= je - j0; ++jj) {
          const float pv = __shfl_sync(0xffffffffu, pj, jj);
#pragma unroll
          for (int i = 0; i < DPL; ++i) {
            const int d = lane + 32 * i;
            if (d < D) acc[pp][i] = fmaf(pv, vs[jj * D + d], acc[pp][i]);
          }
        }
        active[pp] = true;
      }
      // End of a chunk (or of this tile's keys): merge the chain into the total.
      if (active[pp] && ((j0 / kKeyTile) % (kChunkKeys / kKeyTile) == kChunkKeys / kKeyTile - 1 || j0 + kKeyTile > kmax)) {
        merge_state(M[pp], L[pp], A[pp], m[pp], l[pp], acc[pp]);
        m[pp] = -INFINITY, l[pp] = 0.f, active[pp] = false;
#pragma unroll
        for (int i = 0; i < DPL; ++i) acc[pp][i] = 0.f;
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int pp = 0; pp < kPairsPerWarp; ++pp) {
    const int p = warp + kWarps * pp;
    if (p >= num_pairs) continue;
    const int r = tile.row0 + p / hg, h = h_begin + p % hg;
    finish_row(M[pp], L[pp], A[pp], s.sinks, h);
#pragma unroll
    for (int i = 0; i < DPL; ++i) {
      const int d = lane + 32 * i;
      if (d < D) out[(static_cast<int64_t>(r) * s.num_heads + h) * D + d] = A[pp][i];
    }
  }
}

// ---- decode: one row per sequence, split-KV ----------------------------------------------
// CTA (row, KV head, chunk): warp w runs the chain of the canonical reduction above for the
// heads w, w + 4, ... of the group over the chunk's keys and writes its state; the combine
// kernel merges the chunk states in chunk order. Same arithmetic as attention_kernel.
constexpr int kMaxGroup = 64;

template <int DPL>
__global__ void __launch_bounds__(128) attention_decode_kernel(const float* __restrict__ q, DeviceAttentionMeta meta,
                                                               const int32_t* __restrict__ rows,
                                                               const float* __restrict__ k_cache,
                                                               const float* __restrict__ v_cache, AttentionShape s,
                                                               int max_chunks, float* __restrict__ partial) {
  const int D = s.head_dim, width = s.num_kv_heads * D, group = s.num_heads / s.num_kv_heads;
  const int r = rows[blockIdx.x], kvh = blockIdx.y, chunk = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t pos = meta.positions[r];
  const int lo = s.sliding_window > 0 ? max(0, pos - s.sliding_window + 1) : 0;
  const int k_begin = max(lo, chunk * kChunkKeys), k_end = min(pos, chunk * kChunkKeys + kChunkKeys - 1);
  if (k_begin > k_end) return;  // the combine skips this chunk too
  const int32_t* table = meta.block_tables + meta.block_table_offsets[meta.row_seq[r]];

  for (int hh = warp; hh < group; hh += kWarps) {
    const int h = kvh * group + hh;
    const float4* q4 = reinterpret_cast<const float4*>(q + (static_cast<int64_t>(r) * s.num_heads + h) * D);
    float m = -INFINITY, l = 0.f, acc[DPL];
#pragma unroll
    for (int i = 0; i < DPL; ++i) acc[i] = 0.f;
    for (int j0 = chunk * kChunkKeys; j0 < (chunk + 1) * kChunkKeys; j0 += kKeyTile) {
      const int js = max(k_begin, j0), je = min(k_end, j0 + kKeyTile - 1);
      if (js > je) continue;
      const int j = j0 + lane;
      const bool valid = j >= js && j <= je;
      float score = -INFINITY;
      if (valid) {
        const float4* kj = reinterpret_cast<const float4*>(
            k_cache + kv_slot(table, j, s.block_size) * width + static_cast<int64_t>(kvh) * D);
        // All of the key's loads are issued before the first FMA (D <= 32 * DPL): a lane's
        // row is one round trip, not D / 4 dependent ones. The FMA order stays d = 0, 1, ...
        float4 kk[8 * DPL];
#pragma unroll
        for (int c = 0; c < 8 * DPL; ++c)
          if (c < D / 4) kk[c] = kj[c];
        float dot = 0.f;
#pragma unroll
        for (int c = 0; c < 8 * DPL; ++c)
          if (c < D / 4) {
            const float4 qq = q4[c];
            dot = fmaf(qq.x, kk[c].x, dot);
            dot = fmaf(qq.y, kk[c].y, dot);
            dot = fmaf(qq.z, kk[c].z, dot);
            dot = fmaf(qq.w, kk[c].w, dot);
          }
        score = dot * s.scale;
        if (s.softcap > 0.f) score = s.softcap * tanhf(score / s.softcap);
      }
      float pj;
      chain_scores_update(m, l, acc, score, valid, pj);
      // V rows in groups of 8 keys: loads first, then the FMAs in key order.
      for (int jb = js - j0; jb <= je - j0; jb += 8) {
        float v[8][DPL];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const int jj = min(jb + u, je - j0);
          const float* vj = v_cache + kv_slot(table, j0 + jj, s.block_size) * width + static_cast<int64_t>(kvh) * D;
#pragma unroll
          for (int i = 0; i < DPL; ++i) v[u][i] = lane + 32 * i < D ? vj[lane + 32 * i] : 0.f;
        }
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          if (jb + u > je - j0) break;
          const float pv = __shfl_sync(0xffffffffu, pj, jb + u);
#pragma unroll
          for (int i = 0; i < DPL; ++i)
            if (lane + 32 * i < D) acc[i] = fmaf(pv, v[u][i], acc[i]);
        }
      }
    }
    float* st = partial + ((static_cast<int64_t>(blockIdx.x) * s.num_heads + h) * max_chunks + chunk) * (D + 2);
#pragma unroll
    for (int i = 0; i < DPL; ++i)
      if (lane + 32 * i < D) st[2 + lane + 32 * i] = acc[i];
    if (lane == 0) st[0] = m, st[1] = l;
  }
}

// One warp per (decode row, head): merges the chunk states in chunk order, then finishes.
template <int DPL>
__global__ void attention_combine_kernel(DeviceAttentionMeta meta, const int32_t* __restrict__ rows, AttentionShape s,
                                         int max_chunks, const float* __restrict__ partial, float* __restrict__ out) {
  const int i = blockIdx.x, h = blockIdx.y, r = rows[i], D = s.head_dim, lane = threadIdx.x;
  const int32_t pos = meta.positions[r];
  const int lo = s.sliding_window > 0 ? max(0, pos - s.sliding_window + 1) : 0;
  const float* p = partial + (static_cast<int64_t>(i) * s.num_heads + h) * max_chunks * (D + 2);
  float M = -INFINITY, L = 0.f, A[DPL], a[DPL];
#pragma unroll
  for (int k = 0; k < DPL; ++k) A[k] = 0.f;
  for (int c = lo / kChunkKeys; c <= pos / kChunkKeys; ++c) {
    const float* st = p + c * (D + 2);
#pragma unroll
    for (int k = 0; k < DPL; ++k) a[k] = lane + 32 * k < D ? st[2 + lane + 32 * k] : 0.f;
    merge_state(M, L, A, st[0], st[1], a);
  }
  finish_row(M, L, A, s.sinks, h);
#pragma unroll
  for (int k = 0; k < DPL; ++k)
    if (lane + 32 * k < D) out[(static_cast<int64_t>(r) * s.num_heads + h) * D + lane + 32 * k] = A[k];
}

__global__ void write_kv_kernel(const float* __restrict__ k, const float* __restrict__ v, DeviceAttentionMeta meta,
                                float* __restrict__ k_cache, float* __restrict__ v_cache, int block_size,
                                int64_t width) {
  const int r = blockIdx.x;
  const int32_t* table = meta.block_tables + meta.block_table_offsets[meta.row_seq[r]];
  const int64_t slot = kv_slot(table, meta.positions[r], block_size);
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
    k_cache[slot * width + i] = k[r * width + i];
    v_cache[slot * width + i] = v[r * width + i];
  }
}

int heads_per_chunk(int group) { return std::min(group, kMaxPairs); }

}  // namespace

int query_tile_rows(int group) { return std::max(1, kMaxPairs / heads_per_chunk(group)); }

std::vector<QueryTile> make_query_tiles(const int32_t* row_seq, int64_t rows, int tile_rows,
                                        std::vector<int32_t>& decode_rows) {
  std::vector<QueryTile> tiles;
  decode_rows.clear();
  for (int32_t r = 0; r < rows;) {
    int32_t end = r + 1;
    while (end < rows && row_seq[end] == row_seq[r]) ++end;
    if (end - r == 1) decode_rows.push_back(r);
    else
      for (int32_t t = r; t < end; t += tile_rows) tiles.push_back({t, std::min(tile_rows, end - t)});
    r = end;
  }
  return tiles;
}

void attention(const float* q, const DeviceAttentionMeta& meta, const QueryTile* tiles, int num_tiles,
               const float* k_cache, const float* v_cache, const AttentionShape& shape, float* out,
               cudaStream_t stream) {
  if (num_tiles == 0) return;
  const int group = shape.num_heads / shape.num_kv_heads, hpc = heads_per_chunk(group);
  const int chunks = (group + hpc - 1) / hpc;
  const int D = shape.head_dim;
  const size_t smem = (kMaxPairs * D + kKeyTile * (D + 1) + kKeyTile * D) * sizeof(float);
  const dim3 grid(static_cast<unsigned>(num_tiles), static_cast<unsigned>(shape.num_kv_heads * chunks));
  auto launch = [&](auto kernel) {
    if (smem > 48 * 1024)
      TACHYON_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    kernel<<<grid, 128, smem, stream>>>(q, meta, tiles, k_cache, v_cache, shape, hpc, out);
  };
  if (D <= 32) launch(attention_kernel<1>);
  else if (D <= 64) launch(attention_kernel<2>);
  else if (D <= 128) launch(attention_kernel<4>);
  else if (D <= 256) launch(attention_kernel<8>);
  else fail_unsupported("head_dim", D);
  TACHYON_CUDA_LAUNCH_CHECK();
}

int decode_chunks(int32_t max_position) { return max_position / kChunkKeys + 1; }

size_t decode_workspace_bytes(int64_t rows, int num_heads, int head_dim, int max_chunks) {
  return static_cast<size_t>(rows * num_heads * max_chunks * (head_dim + 2)) * sizeof(float);
}

void attention_decode(const float* q, const DeviceAttentionMeta& meta, const int32_t* rows, int num_rows,
                      int max_chunks, const float* k_cache, const float* v_cache, const AttentionShape& shape,
                      float* workspace, float* out, cudaStream_t stream) {
  if (num_rows == 0) return;
  const int D = shape.head_dim, group = shape.num_heads / shape.num_kv_heads;
  if (group > kMaxGroup || D % 4 != 0) fail_unsupported("decode attention group size / head_dim", group * 1000 + D);
  const dim3 grid(static_cast<unsigned>(num_rows), static_cast<unsigned>(shape.num_kv_heads),
                  static_cast<unsigned>(max_chunks));
  const dim3 combine_grid(static_cast<unsigned>(num_rows), static_cast<unsigned>(shape.num_heads));
  auto launch = [&](auto kernel, auto combine) {
    kernel<<<grid, 128, 0, stream>>>(q, meta, rows, k_cache, v_cache, shape, max_chunks, workspace);
    TACHYON_CUDA_LAUNCH_CHECK();
    combine<<<combine_grid, 32, 0, stream>>>(meta, rows, shape, max_chunks, workspace, out);
    TACHYON_CUDA_LAUNCH_CHECK();
  };
  if (D <= 32) launch(attention_decode_kernel<1>, attention_combine_kernel<1>);
  else if (D <= 64) launch(attention_decode_kernel<2>, attention_combine_kernel<2>);
  else if (D <= 128) launch(attention_decode_kernel<4>, attention_combine_kernel<4>);
  else if (D <= 256) launch(attention_decode_kernel<8>, attention_combine_kernel<8>);
  else fail_unsupported("head_dim", D);
}

void write_kv(const float* k, const float* v, int64_t rows, const DeviceAttentionMeta& meta, float* k_cache,
              float* v_cache, int block_size, int64_t width, cudaStream_t stream) {
  if (rows == 0) return;
  write_kv_kernel<<<static_cast<unsigned>(rows), 128, 0, stream>>>(k, v, meta, k_cache, v_cache, block_size, width);
  TACHYON_CUDA_LAUNCH_CHECK();
}

}  // namespace tachyon::kernels::cuda
