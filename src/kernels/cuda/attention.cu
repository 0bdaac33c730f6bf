#include "kernels/cuda/attention.cuh"

#include <algorithm>
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/rowwise.cuh"

namespace tachyon::kernels::cuda {
namespace {

constexpr int kMaxPairs = 16;    // (row, head) pairs per CTA
constexpr int kWarps = 4;
constexpr int kPairsPerWarp = kMaxPairs / kWarps;
constexpr int kKeyTile = 32;
constexpr int kTreeDepth = 16;  // kernels/ops.h kMaxTreeDepth (that header is host-only C++)

__device__ __forceinline__ int64_t kv_slot(const int32_t* table, int32_t position, int block_size) {
  return static_cast<int64_t>(table[position / block_size]) * block_size + position % block_size;
}
// The physical position of logical `position` for row r (tree rows map their branch; see
// kernels/ops.h kMaxTreeDepth). Only the decode kernel and write_kv see tree rows.
__device__ __forceinline__ int32_t tree_position(const DeviceAttentionMeta& meta, int r, int32_t position) {
  if (!meta.tree_base) return position;
  const int32_t base = meta.tree_base[r];
  return base < 0 || position < base ? position : base + meta.tree_path[r * kTreeDepth + (position - base)];
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

__device__ __forceinline__ void cp_async16_attn(void* smem, const void* gmem) {
  const uint32_t sa = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(gmem));
}

template <int DPL>  // head_dim <= 32 * DPL
__global__ void __launch_bounds__(128) attention_kernel(const float* __restrict__ q, DeviceAttentionMeta meta,
                                                        const QueryTile* __restrict__ tiles,
                                                        const float* __restrict__ k_cache,
                                                        const float* __restrict__ v_cache, AttentionShape s,
                                                        int heads_per_chunk, float* __restrict__ out) {
  pdl_wait();
  pdl_launch_dependents();
  extern __shared__ float smem[];
  const int D = s.head_dim, width = s.num_kv_heads * D;
  float* qs = smem;                         // [kMaxPairs][D]
  float* ks = qs + kMaxPairs * D;           // [kKeyTile][D + 4] (padded: lane j reads row j, 16 bytes at a time)
  float* vs = ks + kKeyTile * (D + 4);      // [kKeyTile][D]
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

  // Per key tile: K and V rows staged by cp.async (every load in flight at once); each lane
  // computes its key's dot products with the warp's 4 pairs together (one K read feeds 4
  // FMA chains, each still in d order); the V rows are read once for the 4 pairs, keys in
  // order. Keys outside a pair's range get weight 0 there: fmaf(0, v, acc) == acc.
  const int vecs = D / 4;
  for (int j0 = kmin / kKeyTile * kKeyTile; j0 <= kmax; j0 += kKeyTile) {
    for (int i = tid; i < kKeyTile * vecs; i += blockDim.x) {
      const int jj = i / vecs, c = i % vecs, j = j0 + jj;
      if (j < kmin || j > kmax) continue;
      const int64_t src = kv_slot(table, j, s.block_size) * width + static_cast<int64_t>(kvh) * D + 4 * c;
      cp_async16_attn(ks + jj * (D + 4) + 4 * c, k_cache + src);
      cp_async16_attn(vs + jj * D + 4 * c, v_cache + src);
    }
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 0;\n" ::);
    __syncthreads();
    float dot[kPairsPerWarp];
#pragma unroll
    for (int pp = 0; pp < kPairsPerWarp; ++pp) dot[pp] = 0.f;
    {
      const float4* kj = reinterpret_cast<const float4*>(ks + lane * (D + 4));
#pragma unroll 2
      for (int c = 0; c < vecs; ++c) {
        const float4 kk = kj[c];
#pragma unroll
        for (int pp = 0; pp < kPairsPerWarp; ++pp) {
          const float4 qq = reinterpret_cast<const float4*>(qs + (warp + kWarps * pp) * D)[c];
          dot[pp] = fmaf(qq.x, kk.x, dot[pp]);
          dot[pp] = fmaf(qq.y, kk.y, dot[pp]);
          dot[pp] = fmaf(qq.z, kk.z, dot[pp]);
          dot[pp] = fmaf(qq.w, kk.w, dot[pp]);
        }
      }
    }
    float pj[kPairsPerWarp];
#pragma unroll
    for (int pp = 0; pp < kPairsPerWarp; ++pp) {
      pj[pp] = 0.f;
      const int p = warp + kWarps * pp;
      if (p >= num_pairs) continue;
      const int rl = p / hg;
      const int js = max(lo_s[rl], j0), je = min(pos_s[rl], j0 + kKeyTile - 1);
      if (js <= je) {
        const int j = j0 + lane;
        const bool valid = j >= js && j <= je;
        float score = -INFINITY;
        if (valid) {
          score = dot[pp] * s.scale;
          if (s.softcap > 0.f) score = s.softcap * tanhf(score / s.softcap);
        }
        chain_scores_update(m[pp], l[pp], acc[pp], score, valid, pj[pp]);
        active[pp] = true;
      }
    }
    const int ja = max(kmin, j0) - j0, jb = min(kmax, j0 + kKeyTile - 1) - j0;  // staged rows
    for (int jj = ja; jj <= jb; ++jj) {
      float v[DPL];
#pragma unroll
      for (int i = 0; i < DPL; ++i) v[i] = lane + 32 * i < D ? vs[jj * D + lane + 32 * i] : 0.f;
#pragma unroll
      for (int pp = 0; pp < kPairsPerWarp; ++pp) {
        if (warp + kWarps * pp >= num_pairs) continue;
        const float pv = __shfl_sync(0xffffffffu, pj[pp], jj);
#pragma unroll
        for (int i = 0; i < DPL; ++i) acc[pp][i] = fmaf(pv, v[i], acc[pp][i]);
      }
    }
#pragma unroll
    for (int pp = 0; pp < kPairsPerWarp; ++pp) {
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
// CTA (row, KV head, chunk): the CTA first copies the chunk's K and V rows into shared memory
// (cp.async, every load in flight at once: one DRAM round trip), then warp w runs the chain
// of the canonical reduction above for the heads w, w + 4, ... of the group over the chunk's
// keys and writes its state; the combine kernel merges the chunk states in chunk order. Same
// arithmetic as attention_kernel (the FMA orders are unchanged; only where K/V are read from).
constexpr int kMaxGroup = 64;

// Shared memory of attention_decode_kernel: K [kChunkKeys][D + 4] (padded: lane j reads row j
// with 16-byte loads, conflict-free per quarter warp) and V [kChunkKeys][D].
size_t decode_smem_bytes(int D) { return static_cast<size_t>(kChunkKeys) * (2 * D + 4) * sizeof(float); }

template <int DPL>
__global__ void __launch_bounds__(128) attention_decode_kernel(const float* __restrict__ q, DeviceAttentionMeta meta,
                                                               const int32_t* __restrict__ rows,
                                                               const float* __restrict__ k_cache,
                                                               const float* __restrict__ v_cache, AttentionShape s,
                                                               int max_chunks, float* __restrict__ partial) {
  pdl_wait();
  pdl_launch_dependents();
  extern __shared__ float4 smem4[];
  const int D = s.head_dim, width = s.num_kv_heads * D, group = s.num_heads / s.num_kv_heads;
  const int KS = D + 4;  // K row stride in floats
  float* ks = reinterpret_cast<float*>(smem4);
  float* vs = ks + kChunkKeys * KS;
  const int r = rows[blockIdx.x], kvh = blockIdx.y, chunk = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t pos = meta.positions[r];
  const int lo = s.sliding_window > 0 ? max(0, pos - s.sliding_window + 1) : 0;
  const int c0 = chunk * kChunkKeys;
  const int k_begin = max(lo, c0), k_end = min(pos, c0 + kChunkKeys - 1);
  if (k_begin > k_end) return;  // the combine skips this chunk too
  const int32_t* table = meta.block_tables + meta.block_table_offsets[meta.row_seq[r]];

  const int vecs = D / 4, num_keys = k_end - k_begin + 1;
  for (int i = threadIdx.x; i < num_keys * vecs; i += blockDim.x) {
    const int jj = k_begin - c0 + i / vecs, c = i % vecs;
    const int64_t src =
        kv_slot(table, tree_position(meta, r, c0 + jj), s.block_size) * width + static_cast<int64_t>(kvh) * D + 4 * c;
    cp_async16_attn(ks + jj * KS + 4 * c, k_cache + src);
    cp_async16_attn(vs + jj * D + 4 * c, v_cache + src);
  }
  asm volatile("cp.async.commit_group;\n" ::);
  asm volatile("cp.async.wait_group 0;\n" ::);
  __syncthreads();

  for (int hh = warp; hh < group; hh += kWarps) {
    const int h = kvh * group + hh;
    const float4* q4 = reinterpret_cast<const float4*>(q + (static_cast<int64_t>(r) * s.num_heads + h) * D);
    float m = -INFINITY, l = 0.f, acc[DPL];
#pragma unroll
    for (int i = 0; i < DPL; ++i) acc[i] = 0.f;
    for (int j0 = c0; j0 < c0 + kChunkKeys; j0 += kKeyTile) {
      const int js = max(k_begin, j0), je = min(k_end, j0 + kKeyTile - 1);
      if (js > je) continue;
      const int j = j0 + lane;
      const bool valid = j >= js && j <= je;
      float score = -INFINITY;
      if (valid) {
        const float4* kj = reinterpret_cast<const float4*>(ks + (j - c0) * KS);
        float dot = 0.f;
#pragma unroll
        for (int c = 0; c < 8 * DPL; ++c)
          if (c < D / 4) {
            const float4 qq = q4[c], kk = kj[c];
            dot = fmaf(qq.x, kk.x, dot);
            dot = fmaf(qq.y, kk.y, dot);
            dot = fmaf(qq.z, kk.z, dot);
            dot = fmaf(qq.w, kk.w, dot);
          }
        score = dot * s.scale;
        if (s.softcap > 0.f) score = s.softcap * tanhf(score / s.softcap);
      }
      float pj;
      chain_scores_update(m, l, acc, score, valid, pj);
      for (int jj = js - j0; jj <= je - j0; ++jj) {
        const float pv = __shfl_sync(0xffffffffu, pj, jj);
        const float* vj = vs + (j0 - c0 + jj) * D;
#pragma unroll
        for (int i = 0; i < DPL; ++i)
          if (lane + 32 * i < D) acc[i] = fmaf(pv, vj[lane + 32 * i], acc[i]);
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
  pdl_wait();
  pdl_launch_dependents();
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
  pdl_wait();
  pdl_launch_dependents();
  const int r = blockIdx.x;
  const int32_t* table = meta.block_tables + meta.block_table_offsets[meta.row_seq[r]];
  const int64_t slot = kv_slot(table, tree_position(meta, r, meta.positions[r]), block_size);
  const int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;  // one element per thread
  if (i < width) {
    k_cache[slot * width + i] = k[r * width + i];
    v_cache[slot * width + i] = v[r * width + i];
  }
}

// The attention prologue fused (Backend::qkv_norm_rope_write_kv): one warp per (row, head) of
// q (heads [0, num_heads)) and of k (the rest), read from the fused projection's row; the
// head's vector is normalised in registers with the warp norm kernel's arithmetic, rotated pair
// by pair through shared memory with the rope kernel's, then q heads go to q and k heads, with
// v's head, to the row's cache slot.
template <int PL>  // elements per lane: head_dim <= 32 * PL
__global__ void __launch_bounds__(32) qkv_norm_rope_write_kv_kernel(
    const float* __restrict__ qkv, float* __restrict__ q, int num_heads, int kv_heads, int head_dim,
    const float* __restrict__ q_norm, const float* __restrict__ k_norm, float eps, float weight_offset,
    const float* __restrict__ inv_freq, int half, int offset, float scaling, bool interleaved,
    const int32_t* __restrict__ positions, DeviceAttentionMeta meta, float* __restrict__ k_cache,
    float* __restrict__ v_cache, int block_size) {
  pdl_wait();
  pdl_launch_dependents();
  __shared__ float head[32 * PL];
  const int r = blockIdx.x, lane = threadIdx.x;
  const bool is_k = static_cast<int>(blockIdx.y) >= num_heads;
  const int h = is_k ? blockIdx.y - num_heads : blockIdx.y;
  const int64_t row_stride = static_cast<int64_t>(num_heads + 2 * kv_heads) * head_dim;
  const float* x = qkv + r * row_stride + static_cast<int64_t>(blockIdx.y) * head_dim;  // this q or k head
  const float* w = is_k ? k_norm : q_norm;
  float vals[PL];
#pragma unroll
  for (int j = 0; j < PL; ++j) vals[j] = lane + 32 * j < head_dim ? x[lane + 32 * j] : 0.f;
  if (w) {
    const float inv = inv_rms(warp_sum_squares(vals), head_dim, eps);
#pragma unroll
    for (int j = 0; j < PL; ++j)
      if (lane + 32 * j < head_dim) vals[j] = rms_scaled(vals[j], inv, w[lane + 32 * j], weight_offset);
  }
#pragma unroll
  for (int j = 0; j < PL; ++j)
    if (lane + 32 * j < head_dim) head[lane + 32 * j] = vals[j];
  __syncwarp();
  const int32_t position = positions[r];
  for (int i = lane; i < half; i += 32) {
    const int a = offset + (interleaved ? 2 * i : i), b = offset + (interleaved ? 2 * i + 1 : i + half);
    float x1 = head[a], x2 = head[b];
    rope_rotate(x1, x2, position, inv_freq[i], scaling);
    head[a] = x1;
    head[b] = x2;
  }
  __syncwarp();
  const int64_t width = static_cast<int64_t>(kv_heads) * head_dim;
  const int32_t* table = meta.block_tables + meta.block_table_offsets[meta.row_seq[r]];
  const int64_t slot = is_k ? kv_slot(table, tree_position(meta, r, meta.positions[r]), block_size) : 0;
  const float* v = x + static_cast<int64_t>(kv_heads) * head_dim;  // k heads only: this head's v
#pragma unroll
  for (int j = 0; j < PL; ++j) {
    const int i = lane + 32 * j;
    if (i >= head_dim) break;
    if (is_k) {
      k_cache[slot * width + static_cast<int64_t>(h) * head_dim + i] = head[i];
      v_cache[slot * width + static_cast<int64_t>(h) * head_dim + i] = v[i];
    } else {
      q[(static_cast<int64_t>(r) * num_heads + h) * head_dim + i] = head[i];
    }
  }
}

int heads_per_chunk(int group) { return std::min(group, kMaxPairs); }

}  // namespace

constexpr int32_t kDecodeRunRows = 16;

int query_tile_rows(int group) { return std::max(1, kMaxPairs / heads_per_chunk(group)); }

std::vector<QueryTile> make_query_tiles(const int32_t* row_seq, const int32_t* tree_base, int64_t rows,
                                        int tile_rows, std::vector<int32_t>& decode_rows) {
  std::vector<QueryTile> tiles;
  decode_rows.clear();
  for (int32_t r = 0; r < rows;) {
    int32_t end = r + 1;
    while (end < rows && row_seq[end] == row_seq[r]) ++end;
    // Short runs (decode, and speculative verification of k + 1 rows) take the split-KV decode
    // kernel row by row: the query-tile kernel launches one CTA per tile and is latency-bound
    // there. Same bits either way (keys cut into the same chunks, merged in chunk order).
    if (end - r <= kDecodeRunRows || (tree_base && tree_base[end - 1] >= 0))
      for (int32_t t = r; t < end; ++t) decode_rows.push_back(t);
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
  if (D % 4 != 0) fail_unsupported("attention head_dim (a multiple of 4)", D);
  const size_t smem = (kMaxPairs * D + kKeyTile * (D + 4) + kKeyTile * D) * sizeof(float);
  const dim3 grid(static_cast<unsigned>(num_tiles), static_cast<unsigned>(shape.num_kv_heads * chunks));
  auto go = [&](auto kernel) {
    if (smem > 48 * 1024)
      TACHYON_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    launch(kernel, grid, 128, smem, stream, q, meta, tiles, k_cache, v_cache, shape, hpc, out);
  };
  if (D <= 32) go(attention_kernel<1>);
  else if (D <= 64) go(attention_kernel<2>);
  else if (D <= 128) go(attention_kernel<4>);
  else if (D <= 256) go(attention_kernel<8>);
  else fail_unsupported("head_dim", D);
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
  const size_t smem = decode_smem_bytes(D);
  auto go = [&](auto kernel, auto combine) {
    if (smem > 48 * 1024)
      TACHYON_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    launch(kernel, grid, 128, smem, stream, q, meta, rows, k_cache, v_cache, shape, max_chunks, workspace);
    launch(combine, combine_grid, 32, 0, stream, meta, rows, shape, max_chunks, workspace, out);
  };
  if (D <= 32) go(attention_decode_kernel<1>, attention_combine_kernel<1>);
  else if (D <= 64) go(attention_decode_kernel<2>, attention_combine_kernel<2>);
  else if (D <= 128) go(attention_decode_kernel<4>, attention_combine_kernel<4>);
  else if (D <= 256) go(attention_decode_kernel<8>, attention_combine_kernel<8>);
  else fail_unsupported("head_dim", D);
}

bool qkv_norm_rope_write_kv(const float* qkv, float* q, int64_t rows, const QkPrologue& p,
                            const DeviceAttentionMeta& meta, float* k_cache, float* v_cache, int block_size,
                            cudaStream_t stream) {
  if (p.head_dim > 256 || p.num_heads + p.kv_heads > 65535 || p.offset + 2 * p.half > p.head_dim) return false;
  if (rows == 0) return true;
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(p.num_heads + p.kv_heads));
  auto go = [&](auto kernel) {
    launch(kernel, grid, 32, 0, stream, qkv, q, p.num_heads, p.kv_heads, p.head_dim, p.q_norm, p.k_norm, p.eps,
           p.weight_offset, p.inv_freq, p.half, p.offset, p.scaling, p.interleaved, p.positions, meta, k_cache,
           v_cache, block_size);
  };
  if (p.head_dim <= 64) go(qkv_norm_rope_write_kv_kernel<2>);
  else if (p.head_dim <= 128) go(qkv_norm_rope_write_kv_kernel<4>);
  else go(qkv_norm_rope_write_kv_kernel<8>);
  return true;
}

void write_kv(const float* k, const float* v, int64_t rows, const DeviceAttentionMeta& meta, float* k_cache,
              float* v_cache, int block_size, int64_t width, cudaStream_t stream) {
  if (rows == 0) return;
  launch(write_kv_kernel, dim3(static_cast<unsigned>(rows), static_cast<unsigned>(ceil_div(width, 128))), 128, 0, stream, k, v, meta, k_cache, v_cache, block_size, width);
}

}  // namespace tachyon::kernels::cuda
