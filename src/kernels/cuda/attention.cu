#include "kernels/cuda/attention.cuh"

#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cuda/attention_chunk.cuh"
#include "kernels/cuda/attention_tile.cuh"
#include "kernels/cuda/attention_wgmma.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/rowwise.cuh"

namespace tachyon::kernels::cuda {
namespace {

constexpr int kDecodeWarps = 4;
constexpr int kTreeDepth = 16;  // kernels/ops.h kMaxTreeDepth (that header is host-only C++)
constexpr int kMaxDTilesPerWarp = 16;  // the query-tile kernel's accumulators: 128 columns per warp

// The physical position of logical `position` for row r (tree rows map their branch; see
// kernels/ops.h kMaxTreeDepth). Only the decode kernel and write_kv see tree rows.
__device__ __forceinline__ int32_t tree_position(const DeviceAttentionMeta& meta, int r, int32_t position) {
  if (!meta.tree_base) return position;
  const int32_t base = meta.tree_base[r];
  return base < 0 || position < base ? position : base + meta.tree_path[r * kTreeDepth + (position - base)];
}


// Issues the copies of the K and V rows of chunk keys [c0, c0 + 64) into shared memory (every
// load in flight at once, one cp.async group: wait with cp_async_wait); keys outside
// [k_begin, k_end] are zero rows, so that their zero weights multiply finite values.
// `key_position` maps a logical key to the position of its cache slot. The 64 keys' slots are
// looked up first, one key per thread (the block-table loads in parallel; looked up per 16-byte
// copy they were a chain of dependent loads, bench/NOTES-cuda.md "Session 12"), then shared
// through `chunk_slot_s` behind a CTA barrier: every thread of the CTA calls this.
// (The decode kernel calls the two halves itself: every slot before its programmatic wait, the
// rows in two groups around it.)
__shared__ int64_t chunk_slot_s[kChunkKeys];  // -1: a zero row
template <typename KeyPosition>
__device__ __forceinline__ void lookup_chunk_slots(const int32_t* table, int block_size, int64_t width,
                                                   int64_t head_offset, int c0, int k_begin, int k_end,
                                                   KeyPosition key_position) {
  for (int jj = threadIdx.x; jj < kChunkKeys; jj += blockDim.x) {
    const int j = c0 + jj;
    chunk_slot_s[jj] = j < k_begin || j > k_end ? -1 : kv_slot(table, key_position(j), block_size) * width + head_offset;
  }
  __syncthreads();
}
// Rows [jj_begin, jj_end) of the chunk but the keys in [skip_lo, skip_hi]: copies of the looked-up
// slots, zeros for the rest; no commit.
__device__ __forceinline__ void copy_chunk_rows(const float* __restrict__ k_cache, const float* __restrict__ v_cache,
                                                int D, int c0, int jj_begin, int jj_end, int skip_lo, int skip_hi,
                                                float* ks, float* vs) {
  const int vecs = D / 4, KS = qk_stride(D), VS = v_stride(D);
  for (int i = jj_begin * vecs + threadIdx.x; i < jj_end * vecs; i += blockDim.x) {
    const int jj = i / vecs, c = i % vecs;
    if (c0 + jj >= skip_lo && c0 + jj <= skip_hi) continue;
    float* kd = ks + jj * KS + 4 * c;
    float* vd = vs + jj * VS + 4 * c;
    const int64_t slot = chunk_slot_s[jj];
    if (slot < 0) {
      *reinterpret_cast<float4*>(kd) = make_float4(0.f, 0.f, 0.f, 0.f);
      *reinterpret_cast<float4*>(vd) = make_float4(0.f, 0.f, 0.f, 0.f);
      continue;
    }
    cp_async16(kd, k_cache + slot + 4 * c);
    cp_async16(vd, v_cache + slot + 4 * c);
  }
}
template <typename KeyPosition>
__device__ __forceinline__ void stage_chunk(const float* __restrict__ k_cache, const float* __restrict__ v_cache,
                                            const int32_t* table, int block_size, int64_t width, int64_t head_offset,
                                            int D, int c0, int k_begin, int k_end, KeyPosition key_position,
                                            float* ks, float* vs) {
  lookup_chunk_slots(table, block_size, width, head_offset, c0, k_begin, k_end, key_position);
  copy_chunk_rows(k_cache, v_cache, D, c0, 0, kChunkKeys, 1, 0, ks, vs);
  cp_async_commit();
}

// q of `pairs` (row, head) pairs in the operand format (to_operand), padded with zero pairs to
// `padded` rows. Each thread issues up to 8 loads before its first conversion (the decode
// kernel stages q after its programmatic wait: one load per loop trip waited for each in turn).
template <typename PairQ>
__device__ __forceinline__ void stage_q(PairQ pair_q, int pairs, int padded, int D, uint32_t* qs) {
  constexpr int kBatch = 8;
  const int S = qk_stride(D), n = padded * D;
  for (int base = threadIdx.x; base < n; base += kBatch * blockDim.x) {
    float v[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = base + j * blockDim.x, p = i / D;
      v[j] = i < n && p < pairs ? pair_q(p)[i - p * D] : 0.f;
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = base + j * blockDim.x, p = i / D;
      if (i < n) qs[p * S + i - p * D] = p < pairs ? to_operand(v[j]) : 0u;
    }
  }
}

// ---- query tiles (prefill, chunked prefill) ----------------------------------------------
// CTA (query tile, KV head, head chunk): up to 16 (row, head) pairs sharing one KV head per warp
// (per two warps when head_dim > 128: each holds half of the d tiles). The CTA stages each
// 64-key chunk once (the next one's copies in flight during this one's MMAs where two chunk
// buffers fit); every warp computes its pairs' scores and p (chunk_softmax), merges the chunk
// into its running state and accumulates p·v into it. Tiles run in reverse order: a sequence's
// last tiles have the most keys and start first.
//
// Shape, by measurement (bench/NOTES-cuda.md, "Session 5: attention on tensor cores"): 8 warps
// (128 pairs, half the L2 reads of K and V per FLOP) with two chunk buffers ran 10-12% faster
// than 4 warps with one; 4 warps with two buffers (one CTA per SM) ran 1.7x slower.
struct TileVariant {
  int warps, stages;
};
TileVariant g_tile_variant{8, 2};

__host__ __device__ inline int d_parts(int D) { return (D / 8 + kMaxDTilesPerWarp - 1) / kMaxDTilesPerWarp; }
__host__ __device__ inline int tile_pairs(int D, int warps) { return 16 * (warps / d_parts(D)); }
int tile_pairs(int D) { return tile_pairs(D, g_tile_variant.warps); }

__host__ __device__ inline int chunk_smem_words(int D) { return kChunkKeys * (qk_stride(D) + v_stride(D)); }
size_t tile_smem_bytes(int D, int stages) {
  return (static_cast<size_t>(tile_pairs(D)) * qk_stride(D) + static_cast<size_t>(stages) * chunk_smem_words(D)) * 4;
}
constexpr size_t kMaxSmemPerBlock = 226 * 1024;  // 227 KB less the static arrays
int tile_stages(int D) {
  return tile_smem_bytes(D, g_tile_variant.stages) <= kMaxSmemPerBlock ? g_tile_variant.stages : 1;
}

// DT: d tiles per warp (head_dim <= 8 · DT · d_parts); DK: head_dim / 8 when fixed at compile
// time (constant strides and unrolled loops), 0 to read it from the shape.
template <int DT, int WARPS, int DK>
__global__ void __launch_bounds__(32 * WARPS, 8 / WARPS) attention_kernel(
    const float* __restrict__ q, DeviceAttentionMeta meta, const QueryTile* __restrict__ tiles,
    const float* __restrict__ k_cache, const float* __restrict__ v_cache, AttentionShape s, int heads_per_chunk,
    int stages, float* __restrict__ out) {
  pdl_enter();
  extern __shared__ float4 smem4[];
  const int D = DK > 0 ? 8 * DK : s.head_dim, parts = d_parts(D), max_pairs = tile_pairs(D, WARPS);
  uint32_t* qs = reinterpret_cast<uint32_t*>(smem4);
  float* chunk_buf = reinterpret_cast<float*>(qs + max_pairs * qk_stride(D));
  __shared__ int32_t pos_s[16 * WARPS], lo_s[16 * WARPS];

  const TilePairs tp = tile_pairs_of_cta(tiles, s, heads_per_chunk);
  const int kvh = tp.kvh, hg = tp.hg, h_begin = tp.h_begin, num_pairs = tp.num_pairs;
  const QueryTile tile = tp.tile;
  stage_q([&](int p) { return q + (static_cast<int64_t>(tile.row0 + p / hg) * s.num_heads + h_begin + p % hg) * D; },
          num_pairs, max_pairs, D, qs);
  int kmin, kmax;
  tile_key_windows(meta, s, tile, pos_s, lo_s, kmin, kmax);
  const int32_t* table = meta.block_tables + meta.block_table_offsets[meta.row_seq[tile.row0]];

  const int warp = threadIdx.x / 32;
  const int pair0 = 16 * (warp / parts), part = warp % parts;
  const int nt_begin = part * DT, nt_end = min(D / 8, nt_begin + DT);
  int lo[2], hi[2];  // the lane's two rows (pairs pair0 + g, pair0 + g + 8): their key windows
  int32_t row_lo[2], row_pos[2];
  lane_key_windows(tp, pair0, pos_s, lo_s, row_lo, row_pos);
  float M[2] = {-INFINITY, -INFINITY}, L[2] = {0.f, 0.f}, A[DT][4];
#pragma unroll
  for (int i = 0; i < DT; ++i) A[i][0] = A[i][1] = A[i][2] = A[i][3] = 0.f;

  const int64_t width = static_cast<int64_t>(s.num_kv_heads) * D;
  auto stage = [&](int c0, int buffer) {
    float* ks = chunk_buf + buffer * chunk_smem_words(D);
    stage_chunk(k_cache, v_cache, table, s.block_size, width, static_cast<int64_t>(kvh) * D, D, c0, kmin, kmax,
                [](int j) { return j; }, ks, ks + kChunkKeys * qk_stride(D));
  };
  const int c_first = kmin / kChunkKeys * kChunkKeys;
  stage(c_first, 0);
  for (int c0 = c_first, n = 0; c0 <= kmax; c0 += kChunkKeys, ++n) {
    const bool next = c0 + kChunkKeys <= kmax;
    if (stages == 2 && next) {
      stage(c0 + kChunkKeys, (n + 1) % 2);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const float* ks = chunk_buf + (stages == 2 ? n % 2 : 0) * chunk_smem_words(D);
    const float* vs = ks + kChunkKeys * qk_stride(D);
    bool any = false;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      lo[i] = max(row_lo[i], c0) - c0;
      hi[i] = min(row_pos[i], c0 + kChunkKeys - 1) - c0;
      any |= lo[i] <= hi[i];
    }
    if (__any_sync(0xffffffffu, any)) {
      float p[kChunkTiles][4], m[2], l[2], fo[2], fn[2];
      chunk_scores<DK>(qs + pair0 * qk_stride(D), 16, ks, D, p);
      chunk_softmax(p, lo, hi, s.scale, s.softcap, m, l);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        fo[i] = 1.f, fn[i] = 0.f;
        if (m[i] != -INFINITY) merge_factors(M[i], L[i], m[i], l[i], fo[i], fn[i]);
      }
      constexpr int G = DT < 8 ? DT : 8;  // d tiles per group of interleaved p·v chains
#pragma unroll
      for (int i0 = 0; i0 < DT; i0 += G) {
        if (nt_begin + i0 >= nt_end) break;
        float o[G][4];
        chunk_pv<G>(p, vs, D, nt_begin + i0, nt_end, o);
#pragma unroll
        for (int i = 0; i < G; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (m[e / 2] != -INFINITY) A[i0 + i][e] = fmaf(o[i][e], fn[e / 2], A[i0 + i][e] * fo[e / 2]);
      }
    }
    __syncthreads();
    if (stages == 1 && next) stage(c0 + kChunkKeys, 0);
  }

  write_tile_rows(tp, pair0, s, D, nt_begin, nt_end, M, L, A, out);
}

// ---- the attention prologue: per-head RMSNorm of q and k, RoPE, k and v to the cache ----------
// One warp per head, lane-strided (lane l holds elements l, l + 32, ...; PL per lane): the warp
// norm kernel's arithmetic, then rope.cu's pair by pair through `head` (the head's row in shared
// memory). The fused prologue kernel and the decode attention (which runs the prologue of its own
// q heads and new key) both call these, so their bits are the same by construction.
// The norm weight and the rotation's frequencies: constants, loaded before the programmatic wait.
template <int PL>
struct HeadConstants {
  float w[PL], freq[PL];
};
template <int PL>
__device__ __forceinline__ void load_head_constants(const float* w, const QkPrologue& p, HeadConstants<PL>& c) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < PL; ++j) {
    c.w[j] = w && lane + 32 * j < p.head_dim ? w[lane + 32 * j] : 0.f;
    c.freq[j] = lane + 32 * j < p.half ? p.inv_freq[lane + 32 * j] : 0.f;
  }
}
template <int PL>
__device__ __forceinline__ void load_head(const float* x, int head_dim, float (&vals)[PL]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < PL; ++j) vals[j] = lane + 32 * j < head_dim ? x[lane + 32 * j] : 0.f;
}
// `head` receives the normalised (when `norm`) and rotated head.
template <int PL>
__device__ __forceinline__ void norm_rope_head(float (&vals)[PL], bool norm, const HeadConstants<PL>& c,
                                               const QkPrologue& p, int32_t position, float* head) {
  const int lane = threadIdx.x % 32;
  if (norm) {
    const float inv = inv_rms(warp_sum_squares(vals), p.head_dim, p.eps);
#pragma unroll
    for (int j = 0; j < PL; ++j)
      if (lane + 32 * j < p.head_dim) vals[j] = rms_scaled(vals[j], inv, c.w[j], p.weight_offset);
  }
#pragma unroll
  for (int j = 0; j < PL; ++j)
    if (lane + 32 * j < p.head_dim) head[lane + 32 * j] = vals[j];
  __syncwarp();
#pragma unroll
  for (int j = 0; j < PL; ++j) {
    const int i = lane + 32 * j;
    if (i >= p.half) break;
    const int a = p.offset + (p.interleaved ? 2 * i : i), b = p.offset + (p.interleaved ? 2 * i + 1 : i + p.half);
    float x1 = head[a], x2 = head[b];
    rope_rotate(x1, x2, position, c.freq[j], p.scaling);
    head[a] = x1;
    head[b] = x2;
  }
  __syncwarp();
}

// ---- decode: one row per sequence, split-KV ----------------------------------------------
// CTA (row, KV head, chunk) computes the chunk's state; one CTA of (row, KV head) merges the
// states in chunk order with the same merge_factors, so the bits equal the query-tile kernel's.
// (Until session 6 a separate combine kernel merged: one launch more per layer, which on a
// small model's launch-bound decode step was 1 of 10.)
// Up to kMaxDecodeCluster chunks (contexts up to 512 keys) and one CTA per SM (batch 1 and 2 of
// an 8-KV-head model) the (row, KV head)'s CTAs form one thread block cluster: each keeps its
// chunk state in its shared memory and, after a cluster barrier, the cluster's first CTA merges
// them through distributed shared memory. Beyond that the states go through global memory and
// the last CTA to finish, counted by an atomic, merges them: a fence, an atomic and the states'
// L2 loads, ~3.3 of the kernel's 7.3 us at batch 1 on the H200 (bench/NOTES-cuda.md "Session 25").
constexpr int kMaxGroup = 64;
constexpr int kMaxDecodeCluster = 8;  // the portable cluster size
// A decode CTA's scores are computed in runs of kDecodeScoreRun key tiles, one warp per run
// (decode_chunk): at most kMaxGroup / 16 pair tiles of kChunkTiles / kDecodeScoreRun runs each.
constexpr int kDecodeScoreRun = 2;
constexpr int kDecodeScoreRunsPerTile = kChunkTiles / kDecodeScoreRun;
constexpr int kDecodeScoreRunsPerWarp = (kMaxGroup / 16) * kDecodeScoreRunsPerTile / kDecodeWarps;
static_assert(kChunkTiles % kDecodeScoreRun == 0 && kDecodeScoreRunsPerTile % kDecodeWarps == 0,
              "every warp takes the same number of runs per pair tile");

// Words of a decode CTA's K rows: the chunk's keys, then its scores (per 16-pair tile, 8 key
// tiles x 32 lanes x 4 floats), which need more than the keys only at small head_dim.
__host__ __device__ inline int decode_k_words(int D, int group) {
  const int key_words = kChunkKeys * qk_stride(D), score_words = (group + 15) / 16 * kChunkTiles * 32 * 4;
  return key_words > score_words ? key_words : score_words;
}

size_t decode_smem_bytes(int D, int group, bool cluster) {
  const int states = cluster ? group * (D + 2) : 0;  // the chunk state of each query head: m, l, o
  return static_cast<size_t>(group * qk_stride(D) + decode_k_words(D, group) + kChunkKeys * v_stride(D) + states) *
         4;
}

// The decode attention's own prologue (Backend::attention_from_qkv): from row r of the fused
// projection (x), the group's q heads into qs in the operand format (each head's row of qs is
// its warp's scratch) and, in the CTA of the row's newest chunk (has_key), the row's key and
// value into its cache slot (element offset key_slot) and into their rows of the chunk (k_row,
// v_row) as copy_chunk_rows would stage them from the cache. One warp per task (the q heads,
// then the key), each warp issuing its next task's loads before this one's arithmetic.
template <int PL>
__device__ __forceinline__ void decode_prologue(const float* __restrict__ x, const QkPrologue& p,
                                                const HeadConstants<PL>& cq, const HeadConstants<PL>& ck, int kvh,
                                                int group, int32_t position, bool has_key, int64_t key_slot,
                                                float* __restrict__ k_cache, float* __restrict__ v_cache,
                                                uint32_t* qs, float* k_row, float* v_row) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, D = p.head_dim, S = qk_stride(D);
  const int tasks = group + (has_key ? 1 : 0);
  float cur[PL], next[PL], v_vals[PL];
  const auto load_task = [&](int t, float(&vals)[PL]) {
    const float* head = x + static_cast<int64_t>(t < group ? kvh * group + t : p.num_heads + kvh) * D;
    load_head(head, D, vals);
    if (t == group) load_head(head + static_cast<int64_t>(p.kv_heads) * D, D, v_vals);  // the key's value
  };
  if (warp < tasks) load_task(warp, cur);
  for (int t = warp; t < tasks; t += kDecodeWarps) {
    if (t + kDecodeWarps < tasks) load_task(t + kDecodeWarps, next);
    if (t < group) {
      float* head = reinterpret_cast<float*>(qs + t * S);
      norm_rope_head(cur, p.q_norm != nullptr, cq, p, position, head);
#pragma unroll
      for (int j = 0; j < PL; ++j)
        if (lane + 32 * j < D) qs[t * S + lane + 32 * j] = to_operand(head[lane + 32 * j]);
    } else {
      norm_rope_head(cur, p.k_norm != nullptr, ck, p, position, k_row);
#pragma unroll
      for (int j = 0; j < PL; ++j) {
        const int i = lane + 32 * j;
        if (i >= D) break;
        const float k = round_operand(k_row[i]), v = round_operand(v_vals[j]);
        k_row[i] = k;
        v_row[i] = v;
        k_cache[key_slot + i] = k;
        v_cache[key_slot + i] = v;
      }
    }
    if (t + kDecodeWarps < tasks)
#pragma unroll
      for (int j = 0; j < PL; ++j) cur[j] = next[j];
  }
}

// One chunk of a decode CTA: stages its K and V rows and the row's query heads of KV head kvh
// (16-pair tiles), then each warp takes (pair tile, quarter of the d tiles) items: scores and p
// for the tile (the same chunk_scores / chunk_softmax as the query-tile kernel), p·v for its d
// tiles, and writes the chunk state (m, l, o) of query head hh at `states + hh * head_stride`.
// Keys at logical positions from `first_new` on were written by this step (the kernel just
// before this one: the attention prologue); the older ones are staged before the programmatic
// wait (pdl_wait), so their copies overlap the prologue's tail. q and the new keys come after it.
// fused: q is the fused projection's output and the CTA runs the prologue of its q heads and,
// in the row's newest chunk, of the row's key (decode_prologue): every row is then the only one
// of its sequence in the step, so the row's key is the chunk's only new one.
template <int DK>
constexpr int kPrologueLanes = DK > 0 ? (8 * DK + 31) / 32 : 8;  // decode_prologue's PL
template <int DK>
__device__ __forceinline__ void decode_chunk(const float* __restrict__ q, const QkPrologue& pro, bool fused,
                                             const DeviceAttentionMeta& meta, int r, float* __restrict__ k_cache,
                                             float* __restrict__ v_cache, const AttentionShape& s,
                                             float* __restrict__ states, int64_t head_stride, float4* smem4,
                                             int kvh, int c0, int k_begin, int k_end, int first_new) {
  const int D = DK > 0 ? 8 * DK : s.head_dim, group = s.num_heads / s.num_kv_heads, pair_tiles = (group + 15) / 16;
  uint32_t* qs = reinterpret_cast<uint32_t*>(smem4);  // the group's q heads only (70 KB in all at d 128: 3 CTAs/SM)
  float* ks = reinterpret_cast<float*>(qs + group * qk_stride(D));
  float* vs = ks + decode_k_words(D, group);
  const int32_t* table = meta.block_tables + meta.block_table_offsets[meta.row_seq[r]];
  const int64_t width = static_cast<int64_t>(s.num_kv_heads) * D, head_offset = static_cast<int64_t>(kvh) * D;
  const auto key_position = [&](int j) { return tree_position(meta, r, j); };
  // Every slot, this step's keys' too (the block tables are the step's staged metadata), then
  // the older keys' rows and the zero rows; after the wait only q and the new keys' copies.
  const int new_lo = max(k_begin, first_new);
  lookup_chunk_slots(table, s.block_size, width, head_offset, c0, k_begin, k_end, key_position);
  copy_chunk_rows(k_cache, v_cache, D, c0, 0, kChunkKeys, new_lo, k_end, ks, vs);
  cp_async_commit();
  constexpr int PL = kPrologueLanes<DK>;
  HeadConstants<PL> cq, ck;
  const int32_t pos = meta.positions[r];
  const bool has_key = fused && k_end == pos;  // the row's key: computed here, not copied
  if (fused) {
    load_head_constants(pro.q_norm, pro, cq);
    if (has_key) load_head_constants(pro.k_norm, pro, ck);
  }
  pdl_wait();
  pdl_launch_dependents();
  if (fused) {
    const int64_t row_stride = static_cast<int64_t>(s.num_heads + 2 * s.num_kv_heads) * D;
    decode_prologue(q + r * row_stride, pro, cq, ck, kvh, group, pro.positions[r], has_key,
                    has_key ? chunk_slot_s[pos - c0] : 0, k_cache, v_cache, qs, ks + (pos - c0) * qk_stride(D),
                    vs + (pos - c0) * v_stride(D));
  } else {
    stage_q([&](int p) { return q + (static_cast<int64_t>(r) * s.num_heads + kvh * group + p) * D; }, group, group,
            D, qs);
  }
  if (new_lo <= k_end)
    copy_chunk_rows(k_cache, v_cache, D, c0, new_lo - c0, k_end - c0 + 1, has_key ? pos : 1, has_key ? pos : 0, ks,
                    vs);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  cta_timeline_mark(kTimelineStaged);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // The scores, split over the warps by runs of key tiles, then shared through K's rows (nothing
  // reads K after them): every warp used to compute all of its pair tile's scores for its quarter
  // of p·v, four times the MMAs on the chunk's critical path. Each key tile is its own chain over
  // d, so whichever warp computes it gives the same bits.
  float run_scores[kDecodeScoreRunsPerWarp][kDecodeScoreRun][4];
  const int score_runs = pair_tiles * kDecodeScoreRunsPerTile;
#pragma unroll
  for (int n = 0; n < kDecodeScoreRunsPerWarp; ++n) {
    const int run = warp + n * kDecodeWarps, pair0 = 16 * (run / kDecodeScoreRunsPerTile);
    if (run < score_runs)
      chunk_scores<DK>(qs + pair0 * qk_stride(D), group - pair0, ks, D, run_scores[n],
                       kDecodeScoreRun * (run % kDecodeScoreRunsPerTile));
  }
  __syncthreads();  // every warp's reads of K done
  float4* shared_scores = reinterpret_cast<float4*>(ks);  // [pair tile][key tile][lane]
#pragma unroll
  for (int n = 0; n < kDecodeScoreRunsPerWarp; ++n) {
    const int run = warp + n * kDecodeWarps;
    if (run < score_runs)
#pragma unroll
      for (int j = 0; j < kDecodeScoreRun; ++j)
        shared_scores[(run * kDecodeScoreRun + j) * 32 + lane] =
            make_float4(run_scores[n][j][0], run_scores[n][j][1], run_scores[n][j][2], run_scores[n][j][3]);
  }
  __syncthreads();
  const int d_tiles = D / 8, per_part = (d_tiles + kDecodeWarps - 1) / kDecodeWarps;
  int lo[2], hi[2];
  for (int item = warp; item < pair_tiles * kDecodeWarps; item += kDecodeWarps) {
    const int pair_tile = item / kDecodeWarps, pair0 = 16 * pair_tile, part = item % kDecodeWarps;
    const int nt_begin = part * per_part, nt_end = min(d_tiles, nt_begin + per_part);
    if (nt_begin >= nt_end) continue;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const bool real = pair0 + g + 8 * i < group;
      lo[i] = real ? k_begin - c0 : 1;
      hi[i] = real ? k_end - c0 : 0;
    }
    float p[kChunkTiles][4], m[2], l[2];
#pragma unroll
    for (int j = 0; j < kChunkTiles; ++j) {
      const float4 v = shared_scores[(pair_tile * kChunkTiles + j) * 32 + lane];
      p[j][0] = v.x, p[j][1] = v.y, p[j][2] = v.z, p[j][3] = v.w;
    }
    chunk_softmax(p, lo, hi, s.scale, s.softcap, m, l);
    constexpr int G = 4;
    for (int nt0 = nt_begin; nt0 < nt_end; nt0 += G) {
      float o[G][4];
      chunk_pv<G>(p, vs, D, nt0, nt_end, o);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int hh = pair0 + g + 8 * i;
        if (hh >= group) continue;
        float* st = states + hh * head_stride;
#pragma unroll
        for (int k = 0; k < G; ++k)
          if (nt0 + k < nt_end)
            *reinterpret_cast<float2*>(st + 2 + 8 * (nt0 + k) + 2 * t) = make_float2(o[k][2 * i], o[k][2 * i + 1]);
        if (nt0 == 0 && t == 0) st[0] = m[i], st[1] = l[i];
      }
    }
  }
}

// Where a decode CTA's chunk states are merged from: global memory, written by other CTAs
// (read through L2), or the shared memory of the cluster's CTAs (the chunk's CTA is the
// cluster's CTA of that rank).
struct GlobalChunkStates {
  const float* head;  // chunk 0's state of the merged head
  int64_t chunk_stride;
  __device__ const float* state(int c) const { return head + c * chunk_stride; }
  __device__ static float load(const float* p) { return __ldcg(p); }
};
struct ClusterChunkStates {
  float* head;  // the merged head's state in this CTA's shared memory
  __device__ const float* state(int c) const {
    return cooperative_groups::this_cluster().map_shared_rank(head, static_cast<unsigned>(c));
  }
  __device__ static float load(const float* p) { return *p; }
};

// One warp: head h of decode row r merges its chunk states in chunk order (merge_factors),
// then finishes (finish_factors): the query-tile kernel's arithmetic, so the bits are its.
template <int DPL, typename ChunkStates>
__device__ __forceinline__ void merge_chunks(const DeviceAttentionMeta& meta, int r, const AttentionShape& s, int h,
                                             int lane, const ChunkStates& states, float* __restrict__ out) {
  const int D = s.head_dim;
  const int32_t pos = meta.positions[r];
  const int lo = s.sliding_window > 0 ? max(0, pos - s.sliding_window + 1) : 0;
  float M = -INFINITY, L = 0.f, A[DPL];
#pragma unroll
  for (int k = 0; k < DPL; ++k) A[k] = 0.f;
  // The states of up to kWindow chunks are loaded at once, then merged in chunk order (a load
  // per chunk in the loop waited for each state in turn, on the step's critical path).
  constexpr int kWindow = DPL <= 2 ? 8 : DPL <= 4 ? 4 : 2;
  const int c_end = pos / kChunkKeys + 1;
  for (int c0 = lo / kChunkKeys; c0 < c_end; c0 += kWindow) {
    float ms[kWindow], ls[kWindow], vals[kWindow][DPL];
#pragma unroll
    for (int w = 0; w < kWindow; ++w) {
      const bool in = c0 + w < c_end;
      const float* st = in ? states.state(c0 + w) : nullptr;
      ms[w] = in ? states.load(st) : 0.f;
      ls[w] = in ? states.load(st + 1) : 0.f;
#pragma unroll
      for (int k = 0; k < DPL; ++k) vals[w][k] = in && lane + 32 * k < D ? states.load(st + 2 + lane + 32 * k) : 0.f;
    }
#pragma unroll
    for (int w = 0; w < kWindow; ++w) {
      if (c0 + w >= c_end) break;
      float fo, fn;
      merge_factors(M, L, ms[w], ls[w], fo, fn);
#pragma unroll
      for (int k = 0; k < DPL; ++k)
        if (lane + 32 * k < D) A[k] = fmaf(vals[w][k], fn, A[k] * fo);
    }
  }
  float rescale, inv;
  finish_factors(M, L, s.sinks, h, rescale, inv);
#pragma unroll
  for (int k = 0; k < DPL; ++k)
    if (lane + 32 * k < D) out[(static_cast<int64_t>(r) * s.num_heads + h) * D + lane + 32 * k] = A[k] * rescale * inv;
}

// CTA (row, KV head, chunk): the chunk's state (decode_chunk; chunks outside the row's keys
// have none), then one CTA of (row, KV head) merges the states of the group's heads
// (merge_chunks): one launch, no separate combine kernel. kCluster: the grid is (chunks, KV
// heads, rows) in clusters of all a (row, KV head)'s chunks, the states stay in shared memory
// and the cluster's first CTA merges; else the grid is (rows, KV heads, chunks), the states go
// to `partial` and the last CTA to finish, counted on `counters`, merges. fused: q is the fused
// projection's output and the kernel runs the attention prologue itself (decode_chunk).
template <int DK, bool kCluster>  // DK: head_dim / 8 when fixed at compile time, else 0
__global__ void __launch_bounds__(128) attention_decode_kernel(
    const float* __restrict__ q, const __grid_constant__ QkPrologue prologue, bool fused, DeviceAttentionMeta meta,
    const int32_t* __restrict__ rows, float* __restrict__ k_cache, float* __restrict__ v_cache, AttentionShape s,
    int max_chunks, float* __restrict__ partial, unsigned* __restrict__ counters, int early_kv,
    float* __restrict__ out) {
  // Before pdl_wait this kernel reads only what earlier steps and stream-ordered copies wrote:
  // the row lists, positions and block tables, and the cache slots of keys older than this
  // step's rows. Those slots are written only by earlier steps and by copies at the start of
  // a step, which have completed before this kernel starts: it is scheduled once the kernel
  // before it has released it (the prologue, which releases first; with the prologue fused in,
  // the qkv projection), that kernel once the kernels before it have released it, and the
  // step's first kernel (the embedding) waits before it releases, so the
  // chain of releases from the step's start passes through a kernel that waited for every copy
  // before it. The early release build (TACHYON_PDL_EARLY, where every kernel releases first)
  // breaks that chain, so there everything waits, as it does with early_kv 0 (A/B runs).
  if constexpr (TACHYON_PDL_EARLY) pdl_enter();
  extern __shared__ float4 smem4[];
  __shared__ bool last;
  const int group = s.num_heads / s.num_kv_heads, D = s.head_dim;
  const int i = kCluster ? blockIdx.z : blockIdx.x, kvh = blockIdx.y, chunk = kCluster ? blockIdx.x : blockIdx.z;
  const int r = rows[i];
  const int32_t pos = meta.positions[r];
  const int lo_key = s.sliding_window > 0 ? max(0, pos - s.sliding_window + 1) : 0;
  const int c0 = chunk * kChunkKeys;
  const int k_begin = max(lo_key, c0), k_end = min(pos, c0 + kChunkKeys - 1);
  // This step's keys of the row's sequence: its rows are consecutive and in position order,
  // and a tree row's keys from tree_base on map to this step's tree rows.
  int first_new = pos;
  if (!TACHYON_PDL_EARLY && early_kv) {
    for (int j = r - 1; j >= 0 && meta.row_seq[j] == meta.row_seq[r]; --j) first_new = min(first_new, meta.positions[j]);
    if (meta.tree_base && meta.tree_base[r] >= 0) first_new = min(first_new, meta.tree_base[r]);
  } else {
    first_new = 0;
  }
  // The chunk state of query head hh: in this CTA's shared memory after the K and V rows, or
  // in `partial` at (row, head, chunk).
  float* states =
      reinterpret_cast<float*>(smem4) + group * qk_stride(D) + decode_k_words(D, group) + kChunkKeys * v_stride(D);
  int64_t head_stride = D + 2;
  if constexpr (!kCluster) {
    states = partial + ((static_cast<int64_t>(i) * s.num_heads + kvh * group) * max_chunks + chunk) * (D + 2);
    head_stride = static_cast<int64_t>(max_chunks) * (D + 2);
  }
  if (k_begin <= k_end) {
    decode_chunk<DK>(q, prologue, fused, meta, r, k_cache, v_cache, s, states, head_stride, smem4, kvh,
                     c0, k_begin, k_end, first_new);
    cta_timeline_mark(kTimelineComputed);  // thread 0's share of the chunk state
  } else if constexpr (!TACHYON_PDL_EARLY) {
    pdl_wait();
    pdl_launch_dependents();
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kDpl = DK > 0 ? (8 * DK + 31) / 32 : 8;  // head_dim <= 256
  if constexpr (kCluster) {
    // Arrive (release: this CTA's states) and wait (acquire: every CTA's); the second barrier
    // keeps each CTA's shared memory alive until the first CTA has read it.
    cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    cluster.sync();
    if (chunk == 0) {
      cta_timeline_mark(kTimelineCounted);
      for (int hh = warp; hh < group; hh += kDecodeWarps)
        merge_chunks<kDpl>(meta, r, s, kvh * group + hh, lane, ClusterChunkStates{states + hh * (D + 2)}, out);
      cta_timeline_mark(kTimelineDone);  // warp 0's heads merged
    }
    cluster.sync();
    return;
  }
  __threadfence();  // this CTA's chunk state, before it is counted
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned* counter = counters + static_cast<int64_t>(i) * gridDim.y + kvh;
    last = atomicAdd(counter, 1u) == gridDim.z - 1;
    if (last) *counter = 0;  // ready for the next launch (graph replays too)
  }
  __syncthreads();
  if (!last) return;
  cta_timeline_mark(kTimelineCounted);
  __threadfence();
  for (int hh = warp; hh < group; hh += kDecodeWarps) {
    const float* head = partial + (static_cast<int64_t>(i) * s.num_heads + kvh * group + hh) * max_chunks * (D + 2);
    merge_chunks<kDpl>(meta, r, s, kvh * group + hh, lane, GlobalChunkStates{head, D + 2}, out);
  }
  cta_timeline_mark(kTimelineDone);  // warp 0's heads merged
}

__global__ void write_kv_kernel(const float* __restrict__ k, const float* __restrict__ v, DeviceAttentionMeta meta,
                                float* __restrict__ k_cache, float* __restrict__ v_cache, int block_size,
                                int64_t width) {
  pdl_enter();
  const int r = blockIdx.x;
  const int32_t* table = meta.block_tables + meta.block_table_offsets[meta.row_seq[r]];
  const int64_t slot = kv_slot(table, tree_position(meta, r, meta.positions[r]), block_size);
  const int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;  // one element per thread
  if (i < width) {
    k_cache[slot * width + i] = round_operand(k[r * width + i]);  // the precision attention reads
    v_cache[slot * width + i] = round_operand(v[r * width + i]);
  }
}

// The attention prologue fused (Backend::qkv_norm_rope_write_kv): one warp per (row, head) of
// q (heads [0, num_heads)) and of k (the rest), read from the fused projection's row; q heads go
// to q and k heads, with v's head, to the row's cache slot. kPrologueWarps heads per CTA
// (one-warp CTAs ran at a quarter of the copy bandwidth on long prefills: the SM's CTA slots,
// not its warps, were the limit).
constexpr int kPrologueWarps = 4;
template <int PL>  // elements per lane: head_dim <= 32 * PL
__global__ void __launch_bounds__(32 * kPrologueWarps) qkv_norm_rope_write_kv_kernel(
    const float* __restrict__ qkv, float* __restrict__ q, QkPrologue p, DeviceAttentionMeta meta,
    float* __restrict__ k_cache, float* __restrict__ v_cache, int block_size, bool release_first) {
  __shared__ float heads[kPrologueWarps][32 * PL];
  const int r = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int qk_head = blockIdx.y * kPrologueWarps + warp;  // q heads, then k heads
  // release_first: the decode attention after this kernel is scheduled at once, so its CTAs
  // stage the older keys before its wait while the qkv projection still streams (see
  // attention_decode_kernel for why that stays sound).
  const auto enter = [&] {
    if (release_first) {
      pdl_enter_releasing_first();
    } else {
      pdl_enter();
    }
  };
  if (qk_head >= p.num_heads + p.kv_heads) {
    enter();
    return;
  }
  // Everything but qkv before the programmatic wait: the norm weight, the rotation's
  // frequencies and position, and a k head's cache slot (constants and the step's staged
  // metadata; loaded after the wait they were a chain of round trips on the step's critical path).
  const bool is_k = qk_head >= p.num_heads;
  const int h = is_k ? qk_head - p.num_heads : qk_head, head_dim = p.head_dim;
  const float* w = is_k ? p.k_norm : p.q_norm;
  HeadConstants<PL> c;
  load_head_constants(w, p, c);
  const int32_t position = p.positions[r];
  int64_t slot = 0;
  if (is_k) {
    const int32_t* table = meta.block_tables + meta.block_table_offsets[meta.row_seq[r]];
    slot = kv_slot(table, tree_position(meta, r, meta.positions[r]), block_size);
  }
  enter();
  float* head = heads[warp];
  const int64_t row_stride = static_cast<int64_t>(p.num_heads + 2 * p.kv_heads) * head_dim;
  const float* x = qkv + r * row_stride + static_cast<int64_t>(qk_head) * head_dim;  // this q or k head
  float vals[PL], v_vals[PL];  // v's head loaded with k's (one round trip)
  load_head(x, head_dim, vals);
  load_head(x + static_cast<int64_t>(p.kv_heads) * head_dim, is_k ? head_dim : 0, v_vals);  // k heads: its v
  norm_rope_head(vals, w != nullptr, c, p, position, head);
  const int64_t width = static_cast<int64_t>(p.kv_heads) * head_dim;
#pragma unroll
  for (int j = 0; j < PL; ++j) {
    const int i = lane + 32 * j;
    if (i >= head_dim) break;
    if (is_k) {
      k_cache[slot * width + static_cast<int64_t>(h) * head_dim + i] = round_operand(head[i]);
      v_cache[slot * width + static_cast<int64_t>(h) * head_dim + i] = round_operand(v_vals[j]);
    } else {
      q[(static_cast<int64_t>(r) * p.num_heads + h) * head_dim + i] = head[i];
    }
  }
}

int heads_per_chunk(int group, int head_dim) { return std::min(group, tile_pairs(head_dim)); }

// head_dim: a multiple of 8 (the MMA's k step) up to 256.
void check_head_dim(int D) {
  if (D % 8 != 0 || D > 256) fail_unsupported("attention head_dim (a multiple of 8, at most 256)", D);
}

}  // namespace

constexpr int32_t kDecodeRunRows = 16;

int query_tile_rows(int group, int head_dim) {
  return std::max(1, tile_pairs(head_dim) / heads_per_chunk(group, head_dim));
}

void make_query_tiles(const int32_t* row_seq, const int32_t* tree_base, int64_t rows, int tile_rows,
                      std::vector<QueryTile>& tiles, std::vector<int32_t>& decode_rows) {
  tiles.clear();
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
}

void attention(const float* q, const DeviceAttentionMeta& meta, const QueryTile* tiles, int num_tiles,
               const float* k_cache, const float* v_cache, const AttentionShape& shape, float* out,
               cudaStream_t stream) {
  if (num_tiles == 0) return;
  const int D = shape.head_dim;
  check_head_dim(D);
  const int group = shape.num_heads / shape.num_kv_heads, hpc = heads_per_chunk(group, D);
  if (attention_wgmma_supported(D))
    return attention_wgmma(q, meta, tiles, num_tiles, k_cache, v_cache, shape, hpc, out, stream);
  const int chunks = (group + hpc - 1) / hpc;
  const int stages = tile_stages(D);
  const size_t smem = tile_smem_bytes(D, stages);
  const dim3 grid(static_cast<unsigned>(num_tiles), static_cast<unsigned>(shape.num_kv_heads * chunks));
  auto go = [&](auto kernel, int warps) {
    if (smem > 48 * 1024)
      TACHYON_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    launch(kernel, grid, 32 * warps, smem, stream, q, meta, tiles, k_cache, v_cache, shape, hpc, stages, out);
  };
  auto pick = [&](auto warps) {
    constexpr int W = decltype(warps)::value;
    if (D == 64) go(attention_kernel<8, W, 8>, W);
    else if (D == 128) go(attention_kernel<16, W, 16>, W);
    else if (D == 256) go(attention_kernel<16, W, 32>, W);
    else if (D <= 32) go(attention_kernel<4, W, 0>, W);
    else if (D <= 64) go(attention_kernel<8, W, 0>, W);
    else go(attention_kernel<kMaxDTilesPerWarp, W, 0>, W);
  };
  if (g_tile_variant.warps == 8) pick(std::integral_constant<int, 8>{});
  else pick(std::integral_constant<int, 4>{});
}

void set_attention_tile_variant(int warps, int stages) {
  if ((warps != 4 && warps != 8) || (stages != 1 && stages != 2)) fail_unsupported("attention tile variant", warps * 10 + stages);
  g_tile_variant = {warps, stages};
}

int decode_chunks(int32_t max_position) { return max_position / kChunkKeys + 1; }

size_t decode_workspace_bytes(int64_t rows, int num_heads, int head_dim, int max_chunks) {
  return static_cast<size_t>(rows * num_heads * max_chunks * (head_dim + 2)) * sizeof(float);
}

bool prologue_supported(const QkPrologue& p) {
  return p.head_dim <= 256 && p.num_heads + p.kv_heads <= 65535 && p.offset + 2 * p.half <= p.head_dim;
}

void attention_decode(const float* q, const QkPrologue* prologue, const DeviceAttentionMeta& meta,
                      const int32_t* rows, int num_rows, int max_chunks, float* k_cache, float* v_cache,
                      const AttentionShape& shape, float* workspace, unsigned* counters, float* out,
                      cudaStream_t stream) {
  if (num_rows == 0) return;
  if (prologue && !prologue_supported(*prologue)) fail_unsupported("decode attention prologue head_dim", prologue->head_dim);
  const int D = shape.head_dim, group = shape.num_heads / shape.num_kv_heads;
  check_head_dim(D);
  if (group > kMaxGroup) fail_unsupported("decode attention query heads per KV head", group);
  // A/B runs: TACHYON_ATTENTION_EARLY_KV=0 stages every key after the programmatic wait, and
  // TACHYON_DECODE_CLUSTER=0 merges through global memory at every context length.
  static const int early_kv = env_turned_off("TACHYON_ATTENTION_EARLY_KV") ? 0 : 1;
  static const bool cluster_on = !env_turned_off("TACHYON_DECODE_CLUSTER");
  static const size_t smem_limit = static_cast<size_t>(device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin));
  static const int64_t sms = device_attribute(cudaDevAttrMultiProcessorCount);
  // Clusters only while every CTA has an SM of its own: with more, a cluster's CTAs are placed
  // together and hold their SMs until the merging CTA has read them, so later CTAs start later
  // (H200, batch 8, 512 CTAs: decode 2-4% slower than merging through global memory).
  const int64_t ctas = static_cast<int64_t>(num_rows) * shape.num_kv_heads * max_chunks;
  const bool cluster =
      cluster_on && max_chunks <= kMaxDecodeCluster && ctas <= sms && decode_smem_bytes(D, group, true) <= smem_limit;
  const size_t smem = decode_smem_bytes(D, group, cluster);
  const unsigned rows_u = static_cast<unsigned>(num_rows), heads_u = static_cast<unsigned>(shape.num_kv_heads),
                 chunks_u = static_cast<unsigned>(max_chunks);
  auto decode = [&](auto kernel, dim3 grid, unsigned cluster_x) {
    if (smem > 48 * 1024)
      TACHYON_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    launch_clustered(kernel, grid, 128, smem, stream, cluster_x, q, prologue ? *prologue : QkPrologue{},
                     prologue != nullptr, meta, rows, k_cache, v_cache, shape, max_chunks, workspace, counters,
                     early_kv, out);
  };
  auto pick = [&](auto dk) {
    constexpr int DK = decltype(dk)::value;
    if (cluster) decode(attention_decode_kernel<DK, true>, dim3(chunks_u, heads_u, rows_u), chunks_u);
    else decode(attention_decode_kernel<DK, false>, dim3(rows_u, heads_u, chunks_u), 1u);
  };
  if (D == 64) pick(std::integral_constant<int, 8>{});
  else if (D == 128) pick(std::integral_constant<int, 16>{});
  else if (D == 256) pick(std::integral_constant<int, 32>{});
  else pick(std::integral_constant<int, 0>{});
}

bool qkv_norm_rope_write_kv(const float* qkv, float* q, int64_t rows, const QkPrologue& p,
                            const DeviceAttentionMeta& meta, float* k_cache, float* v_cache, int block_size,
                            cudaStream_t stream) {
  if (!prologue_supported(p)) return false;
  if (rows == 0) return true;
  const dim3 grid(static_cast<unsigned>(rows),
                  static_cast<unsigned>(ceil_div(p.num_heads + p.kv_heads, kPrologueWarps)));
  static const bool release_first = !env_turned_off("TACHYON_PROLOGUE_RELEASE_FIRST");  // A/B runs
  auto go = [&](auto kernel) {
    launch(kernel, grid, 32 * kPrologueWarps, 0, stream, qkv, q, p, meta, k_cache, v_cache, block_size, release_first);
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
