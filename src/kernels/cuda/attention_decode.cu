// Decode attention: rows alone in their sequence, split-KV (one CTA per row, KV head and 64-key
// chunk), the chunk states merged in chunk order in the same launch (from 64 chunks on by a merge
// kernel of their own); optionally with the attention prologue of its rows fused in
// (Backend::attention_from_qkv).
#include "kernels/cuda/attention_decode.cuh"

#include <atomic>

#include "kernels/cuda/attention_common.cuh"

namespace tachyon::kernels::cuda {
namespace {

// ---- decode: one row per sequence, split-KV ----------------------------------------------
// CTA (row, KV head, chunk) computes the chunk's state; one CTA of (row, KV head) merges the
// states in chunk order with the same merge_factors, so the bits equal the query-tile kernel's.
// (A separate combine kernel would cost one launch more per layer: 1 of 10 on a small model's
// launch-bound decode step.)
// Up to kMaxDecodeCluster chunks (contexts up to 512 keys) and one CTA per SM (batch 1 and 2 of
// an 8-KV-head model) the (row, KV head)'s CTAs form one thread block cluster: each keeps its
// chunk state in its shared memory and, after a cluster barrier, the cluster's first CTA merges
// them through distributed shared memory. Beyond that the states go through global memory and
// the last CTA to finish, counted by an atomic, merges them: a fence, an atomic and the states'
// L2 loads, ~3.3 of the kernel's 7.3 us at batch 1 on the H200 (docs/perf/cuda.md). From
// kMergeApartMinChunks chunks on, attention_decode_merge_kernel merges them instead.
constexpr int kMaxGroup = 64;
// The first key a row at position `pos` attends to: its sliding window's, else key 0.
__device__ __forceinline__ int first_key(int32_t pos, const AttentionShape& s) {
  return s.sliding_window > 0 ? max(0, pos - s.sliding_window + 1) : 0;
}
constexpr int kMaxDecodeCluster = 8;  // the portable cluster size
// A chunk state of one query head: m, l, two words of padding (each state 16-byte aligned, so
// that the merge stages them with 16-byte copies), then o.
constexpr int kStateHeader = 4;
__host__ __device__ inline int state_words(int D) { return D + kStateHeader; }
// A decode CTA's scores are computed in runs of kDecodeScoreRun key tiles, one warp per run
// (decode_chunk): at most kMaxGroup / 16 pair tiles of kChunkTiles / kDecodeScoreRun runs each.
constexpr int kDecodeScoreRun = 2;
constexpr int kDecodeScoreRunsPerTile = kChunkTiles / kDecodeScoreRun;
constexpr int kDecodeScoreRunsPerWarp = (kMaxGroup / 16) * kDecodeScoreRunsPerTile / kDecodeWarps;
static_assert(kChunkTiles % kDecodeScoreRun == 0 && kDecodeScoreRunsPerTile % kDecodeWarps == 0,
              "every warp takes the same number of runs per pair tile");

// Words of a decode CTA's scores: per 16-pair tile, 8 key tiles x 32 lanes x 4 floats.
__host__ __device__ inline int decode_score_words(int group) { return (group + 15) / 16 * kChunkTiles * 32 * 4; }
// Words of a decode CTA's K rows: the chunk's keys, then its scores, which need more than the
// keys only at small head_dim.
__host__ __device__ inline int decode_k_words(int D, int group) {
  const int key_words = kChunkKeys * qk_stride(D), score_words = decode_score_words(group);
  return key_words > score_words ? key_words : score_words;
}

// K and V together: q, K (then the scores), V, the cluster's chunk states. K and V apart
// (attention.cuh; never in a cluster): q, the scores, the new key's V row (the fused prologue's),
// then one buffer for K, then V: at head_dim 256 and 4 query heads per KV head, 74 KB instead of 134.
size_t decode_smem_bytes(int D, int group, bool cluster, bool kv_apart) {
  if (kv_apart)
    return static_cast<size_t>(group * qk_stride(D) + decode_score_words(group) + v_stride(D) +
                               kChunkKeys * std::max(qk_stride(D), v_stride(D))) *
           4;
  const int states = cluster ? group * state_words(D) : 0;  // the chunk state of each query head
  return static_cast<size_t>(group * qk_stride(D) + decode_k_words(D, group) + kChunkKeys * v_stride(D) + states) *
         4;
}

// The decode attention's own prologue (Backend::attention_from_qkv): from row r of the fused
// projection (x), the group's q heads into qs in the operand format (each head's row of qs is
// its warp's scratch) and, in the CTA of the row's newest chunk (has_key), the row's key and
// value into its cache slot (key_slot: chunk_slot_s's key) and into their rows of the chunk (k_row,
// v_row) as copy_chunk_rows would stage them from the cache (a coded cache: quantized, stored,
// then read back through the staging's own dequantization). One warp per task (the q heads,
// then the key), each warp issuing its next task's loads before this one's arithmetic.
template <int PL>
__device__ __forceinline__ void decode_prologue(const float* __restrict__ x, const QkPrologue& p,
                                                const HeadConstants<PL>& cq, const HeadConstants<PL>& ck, int kvh,
                                                int group, int32_t position, bool has_key, int64_t key_slot,
                                                const KvPair& kv, uint32_t* qs, float* k_row, float* v_row) {
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
      if (kv.f32()) {
        float* __restrict__ k_cache = reinterpret_cast<float*>(kv.k.base);
        float* __restrict__ v_cache = reinterpret_cast<float*>(kv.v.base);
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
      } else {
#pragma unroll
        for (int j = 0; j < PL; ++j)
          if (lane + 32 * j < D) v_row[lane + 32 * j] = v_vals[j];
        __syncwarp();
        store_head_record(kv.k, key_slot, k_row, D);
        store_head_record(kv.v, key_slot, v_row, D);
        __syncwarp();  // the warp's stores, visible to its own loads below
        for (int e0 = 8 * lane; e0 < D; e0 += 8 * 32) load_head_record8(kv, key_slot, e0, k_row + e0, v_row + e0);
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
// kKvApart (attention.cuh): K is staged so, then V over it once the scores are in their own
// words; the new key's V row waits in a row of its own meanwhile.
template <int DK>
constexpr int kPrologueLanes = DK > 0 ? (8 * DK + 31) / 32 : 8;  // decode_prologue's PL
template <int DK, bool kKvApart>
__device__ __forceinline__ void decode_chunk(const float* __restrict__ q, const QkPrologue& pro, bool fused,
                                             const DeviceAttentionMeta& meta, int r, const KvPair& kv,
                                             const AttentionShape& s,
                                             float* __restrict__ states, int64_t head_stride, float4* smem4,
                                             int kvh, int c0, int k_begin, int k_end, int first_new) {
  const int D = DK > 0 ? 8 * DK : s.head_dim, group = s.num_heads / s.num_kv_heads, pair_tiles = (group + 15) / 16;
  uint32_t* qs = reinterpret_cast<uint32_t*>(smem4);  // the group's q heads only (70 KB in all at d 128: 3 CTAs/SM)
  float* ks = reinterpret_cast<float*>(qs + group * qk_stride(D));
  float* vs = ks + decode_k_words(D, group);
  float* v_new = nullptr;  // K and V apart: the new key's V row
  // K and V apart: K first, in batches of 4 loads per thread (8 spilled: ptxas held the kernel to
  // 168 registers), V after the scores.
  constexpr ChunkRows kFirstRows = kKvApart ? ChunkRows::K : ChunkRows::KV;
  constexpr int kFirstBatch = kKvApart ? kStageBatch / 2 : kStageBatch;
  if constexpr (kKvApart) {
    v_new = ks + decode_score_words(group);
    ks = vs = v_new + v_stride(D);
  }
  const int32_t* table = meta.block_tables + meta.block_table_offsets[meta.row_seq[r]];
  const auto key_position = [&](int j) { return tree_position(meta, r, j); };
  // Every slot, this step's keys' too (the block tables are the step's staged metadata), then
  // the older keys' rows and the zero rows; after the wait only q and the new keys' copies.
  const int new_lo = max(k_begin, first_new);
  lookup_chunk_slots(kv, table, s.block_size, kvh, D, c0, k_begin, k_end, key_position);
  copy_chunk_rows<kFirstBatch, kFirstRows>(kv, D, c0, 0, kChunkKeys, new_lo, k_end, ks, vs);
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
                    has_key ? chunk_slot_s[pos - c0] : 0, kv, qs, ks + (pos - c0) * qk_stride(D),
                    kKvApart ? v_new : vs + (pos - c0) * v_stride(D));
  } else {
    stage_q([&](int p) { return q + (static_cast<int64_t>(r) * s.num_heads + kvh * group + p) * D; }, group, group,
            D, qs);
  }
  if (new_lo <= k_end)
    copy_chunk_rows<kFirstBatch, kFirstRows>(kv, D, c0, new_lo - c0, k_end - c0 + 1, has_key ? pos : 1,
                                             has_key ? pos : 0, ks, vs);
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
  // [pair tile][key tile][lane]; K and V apart: in their own words
  float4* shared_scores = reinterpret_cast<float4*>(kKvApart ? reinterpret_cast<float*>(qs + group * qk_stride(D)) : ks);
#pragma unroll
  for (int n = 0; n < kDecodeScoreRunsPerWarp; ++n) {
    const int run = warp + n * kDecodeWarps;
    if (run < score_runs)
#pragma unroll
      for (int j = 0; j < kDecodeScoreRun; ++j)
        shared_scores[(run * kDecodeScoreRun + j) * 32 + lane] =
            make_float4(run_scores[n][j][0], run_scores[n][j][1], run_scores[n][j][2], run_scores[n][j][3]);
  }
  if constexpr (kKvApart) {
    // V over K (the slots looked up above; the scores' registers free again), the new key's row
    // from the prologue.
    copy_chunk_rows<kStageBatch, ChunkRows::V>(kv, D, c0, 0, kChunkKeys, has_key ? pos : 1, has_key ? pos : 0, vs, vs);
    cp_async_commit();
    if (has_key)
      for (int i = threadIdx.x; i < D; i += blockDim.x) vs[(pos - c0) * v_stride(D) + i] = v_new[i];
    cp_async_wait<0>();
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
            *reinterpret_cast<float2*>(st + kStateHeader + 8 * (nt0 + k) + 2 * t) = make_float2(o[k][2 * i], o[k][2 * i + 1]);
        if (nt0 == 0 && t == 0) st[0] = m[i], st[1] = l[i];
      }
    }
  }
}

// The cluster's chunk states, merged from the shared memory of its CTAs (the chunk's CTA is the
// cluster's CTA of that rank).
#if !TACHYON_PRE_HOPPER_DEVICE_CODE  // clusters are Hopper's
struct ClusterChunkStates {
  float* head;  // the merged head's state in this CTA's shared memory
  __device__ const float* state(int c) const {
    return cooperative_groups::this_cluster().map_shared_rank(head, static_cast<unsigned>(c));
  }
  __device__ static float load(const float* p) { return *p; }
};
#endif

// One warp: head h of decode row r merges its chunk states in chunk order (merge_factors),
// then finishes (finish_factors): the query-tile kernel's arithmetic, so the bits are its.
// (The cluster's merge: up to kMaxDecodeCluster chunks. merge_global_chunks below merges any
// number from global memory with the same bits.)
template <int DPL, typename ChunkStates>
__device__ __forceinline__ void merge_chunks(const DeviceAttentionMeta& meta, int r, const AttentionShape& s, int h,
                                             int lane, const ChunkStates& states, float* __restrict__ out) {
  const int D = s.head_dim;
  const int32_t pos = meta.positions[r];
  const int lo = first_key(pos, s);
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
      for (int k = 0; k < DPL; ++k) vals[w][k] = in && lane + 32 * k < D ? states.load(st + kStateHeader + lane + 32 * k) : 0.f;
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

// Lane j of a warp merging a stage of up to 32 chunks after a running maximum M (m: chunk j's
// maximum, -inf past the stage's chunks): returns max(M, m_0 .. m_j), the running maximum after
// chunk j, and sets chunk j's merge_factors (fo, fn). fmaxf is exact, so the prefix maximum is
// the sequential merge's and so are the exp2f arguments.
__device__ __forceinline__ float stage_merge_factors(float M, float m, int lane, float& fo, float& fn) {
  float P = m;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const float o = __shfl_up_sync(~0u, P, d);
    if (lane >= d) P = fmaxf(P, o);
  }
  P = fmaxf(M, P);
  float before = __shfl_up_sync(~0u, P, 1);  // the running maximum before chunk j
  if (lane == 0) before = M;
  fo = exp2f(before - P);
  fn = exp2f(m - P);
  return P;
}

// The last CTA of (row, KV head) merges its group's chunk states from global memory (written by
// the other CTAs, read through L2), kDecodeWarps heads at a time, one warp per head, and writes
// the heads' outputs. The states stream through the CTA's shared memory (free once its own chunk
// is done) in stages of up to 32 chunks, two stages in flight (cp.async): loading a few chunks per
// round trip, the merge of a 32k context waited for ~128 dependent L2 round trips per head.
// The bits are merge_chunks': the running maximum before and after each chunk is a prefix maximum
// of the chunks' m (fmaxf is exact, so any grouping gives it), so each chunk's two exp2f get the
// arguments they get in the sequential merge and are computed lane-parallel (lane j: the stage's
// chunk j); L's and A's chains then run in chunk order with the same multiply and fmaf.
template <int DPL>
__device__ __forceinline__ void merge_global_chunks(const DeviceAttentionMeta& meta, int r, const AttentionShape& s,
                                                    int head0, int group, const float* __restrict__ states0,
                                                    int64_t head_stride, float4* smem4, float* __restrict__ out) {
  const int D = s.head_dim, SW = state_words(D), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t pos = meta.positions[r];
  const int lo = first_key(pos, s);
  const int c_begin = lo / kChunkKeys, c_end = pos / kChunkKeys + 1;
  unsigned smem_bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(smem_bytes));
  // Two stages of kDecodeWarps heads' states fit: at least 64 rows of head_dim words (the chunk's V).
  const int per_stage = min(32, static_cast<int>(smem_bytes / 4) / (2 * kDecodeWarps * SW));
  const int stages = (c_end - c_begin + per_stage - 1) / per_stage;
  float* const buffers = reinterpret_cast<float*>(smem4);
  for (int round = 0; round < group; round += kDecodeWarps) {
    const int heads = min(kDecodeWarps, group - round);
    // Chunks [c0, c0 + per_stage) of the round's heads into buffer stage % 2: [head][chunk][SW].
    const auto issue = [&](int stage) {
      const int c0 = c_begin + stage * per_stage, units = min(per_stage, c_end - c0) * SW / 4;
      float* dst = buffers + (stage & 1) * kDecodeWarps * per_stage * SW;
      for (int u = threadIdx.x; u < heads * units; u += blockDim.x) {
        const int hh = u / units, at = 4 * (u % units);
        cp_async16(dst + hh * per_stage * SW + at, states0 + (round + hh) * head_stride + static_cast<int64_t>(c0) * SW + at);
      }
      cp_async_commit();
    };
    float M = -INFINITY, L = 0.f, A[DPL];
#pragma unroll
    for (int k = 0; k < DPL; ++k) A[k] = 0.f;
    issue(0);
    if (stages > 1) issue(1);
    for (int stage = 0; stage < stages; ++stage) {
      if (stage + 1 < stages) cp_async_wait<1>();
      else cp_async_wait<0>();
      __syncthreads();  // every thread's copies of this stage landed
      if (warp < heads) {
        const int n = min(per_stage, c_end - (c_begin + stage * per_stage));
        const float* buf = buffers + ((stage & 1) * kDecodeWarps + warp) * per_stage * SW;
        const float m = lane < n ? buf[lane * SW] : -INFINITY, l = lane < n ? buf[lane * SW + 1] : 0.f;
        float fo, fn;
        const float P = stage_merge_factors(M, m, lane, fo, fn);
        for (int j = 0; j < n; ++j) {
          const float fo_j = __shfl_sync(~0u, fo, j), fn_j = __shfl_sync(~0u, fn, j), l_j = __shfl_sync(~0u, l, j);
          L = fmaf(l_j, fn_j, L * fo_j);
#pragma unroll
          for (int k = 0; k < DPL; ++k)
            if (lane + 32 * k < D) A[k] = fmaf(buf[j * SW + kStateHeader + lane + 32 * k], fn_j, A[k] * fo_j);
        }
        M = __shfl_sync(~0u, P, n - 1);
      }
      __syncthreads();  // every warp done with the buffer before it is filled again
      if (stage + 2 < stages) issue(stage + 2);
    }
    if (warp < heads) {
      const int h = head0 + round + warp;
      float rescale, inv;
      finish_factors(M, L, s.sinks, h, rescale, inv);
#pragma unroll
      for (int k = 0; k < DPL; ++k)
        if (lane + 32 * k < D) out[(static_cast<int64_t>(r) * s.num_heads + h) * D + lane + 32 * k] = A[k] * rescale * inv;
    }
  }
}

// CTA (row, KV head, chunk): the chunk's state (decode_chunk; chunks outside the row's keys
// have none), then one CTA of (row, KV head) merges the states of the group's heads
// (merge_chunks): one launch, no separate combine kernel. kCluster: the grid is (chunks, KV
// heads, rows) in clusters of all a (row, KV head)'s chunks, the states stay in shared memory
// and the cluster's first CTA merges; else the grid is (rows, KV heads, chunks), the states go
// to `partial` and the last CTA to finish, counted on `counters`, merges. fused: q is the fused
// projection's output and the kernel runs the attention prologue itself (decode_chunk). kKvApart:
// K and V staged apart (attention.cuh; not in a cluster).
// Three CTAs per SM outside clusters (168 registers; 69.7 KB of shared memory each at head_dim 128
// and 4 query heads per KV head): a long context's thousands of chunk CTAs are latency-bound, and at
// the 226 registers ptxas took unbounded only two fit (H100, 32k context: 0.5 CTAs resident per SM
// on average, bench/cuda/attention_timeline.py). A cluster's CTAs have an SM each.
template <int DK, bool kCluster, bool kKvApart = false>  // DK: head_dim / 8 when fixed at compile time, else 0
__global__ void __launch_bounds__(128, kCluster ? 1 : 3) attention_decode_kernel(
    const float* __restrict__ q, const __grid_constant__ QkPrologue prologue, bool fused, DeviceAttentionMeta meta,
    const int32_t* __restrict__ rows, const __grid_constant__ KvPair kv, AttentionShape s,
    int max_chunks, float* __restrict__ partial, unsigned* __restrict__ counters, float* __restrict__ out) {
  // Before pdl_wait this kernel reads only what earlier steps and stream-ordered copies wrote:
  // the row lists, positions and block tables, and the cache slots of keys older than this
  // step's rows. Those slots are written only by earlier steps and by copies at the start of
  // a step, which have completed before this kernel starts: it is scheduled once the kernel
  // before it has released it (the prologue, which releases first; with the prologue fused in,
  // the qkv projection), that kernel once the kernels before it have released it, and the
  // step's first kernel (the embedding) waits before it releases, so the
  // chain of releases from the step's start passes through a kernel that waited for every copy
  // before it. A kernel that released the next one before its own wait would break that chain.
  static_assert(!(kCluster && kKvApart), "a cluster's chunk states follow K and V together");
  extern __shared__ float4 smem4[];
  __shared__ bool last;
  const int group = s.num_heads / s.num_kv_heads, D = s.head_dim;
  const int i = kCluster ? blockIdx.z : blockIdx.x, kvh = blockIdx.y, chunk = kCluster ? blockIdx.x : blockIdx.z;
  const int r = rows[i];
  const int32_t pos = meta.positions[r];
  const int lo_key = first_key(pos, s);
  const int c0 = chunk * kChunkKeys;
  const int k_begin = max(lo_key, c0), k_end = min(pos, c0 + kChunkKeys - 1);
  // This step's keys of the row's sequence: its rows are consecutive and in position order,
  // and a tree row's keys from tree_base on map to this step's tree rows.
  int first_new = pos;
  for (int j = r - 1; j >= 0 && meta.row_seq[j] == meta.row_seq[r]; --j) first_new = min(first_new, meta.positions[j]);
  if (meta.tree_base && meta.tree_base[r] >= 0) first_new = min(first_new, meta.tree_base[r]);
  // The chunk state of query head hh: in this CTA's shared memory after the K and V rows, or
  // in `partial` at (row, head, chunk).
  float* states =
      reinterpret_cast<float*>(smem4) + group * qk_stride(D) + decode_k_words(D, group) + kChunkKeys * v_stride(D);
  int64_t head_stride = state_words(D);
  if constexpr (!kCluster) {
    states = partial + ((static_cast<int64_t>(i) * s.num_heads + kvh * group) * max_chunks + chunk) * state_words(D);
    head_stride = static_cast<int64_t>(max_chunks) * state_words(D);
  }
  if (k_begin <= k_end) {
    decode_chunk<DK, kKvApart>(q, prologue, fused, meta, r, kv, s, states, head_stride, smem4, kvh, c0, k_begin, k_end,
                     first_new);
    cta_timeline_mark(kTimelineComputed);  // thread 0's share of the chunk state
  } else {
    pdl_wait();
    pdl_launch_dependents();
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kDpl = DK > 0 ? (8 * DK + 31) / 32 : 8;  // head_dim <= 256
  if constexpr (kCluster) {
#if TACHYON_PRE_HOPPER_DEVICE_CODE  // never launched there (attention_decode below)
    __trap();
#else
    // Arrive (release: this CTA's states) and wait (acquire: every CTA's); the second barrier
    // keeps each CTA's shared memory alive until the first CTA has read it.
    cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    cluster.sync();
    if (chunk == 0) {
      cta_timeline_mark(kTimelineCounted);
      for (int hh = warp; hh < group; hh += kDecodeWarps)
        merge_chunks<kDpl>(meta, r, s, kvh * group + hh, lane, ClusterChunkStates{states + hh * state_words(D)}, out);
      cta_timeline_mark(kTimelineDone);  // warp 0's heads merged
    }
    cluster.sync();
    return;
#endif
  }
  if (counters == nullptr) return;  // merged by attention_decode_merge_kernel (long contexts)
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
  merge_global_chunks<kDpl>(meta, r, s, kvh * group, group,
                            partial + (static_cast<int64_t>(i) * s.num_heads + kvh * group) * max_chunks * state_words(D),
                            static_cast<int64_t>(max_chunks) * state_words(D), smem4, out);
  cta_timeline_mark(kTimelineDone);  // warp 0's heads merged
}
// Long contexts: the chunk states of (row i, head h) merged after the chunk kernel, by one warp per
// 32 of the head's dimensions (lane: one dimension), so that thousands of states load through
// every SM instead of the last chunk CTA's (at 32k keys and batch 1, 1 MB per KV head through one
// SM: ~60 of the layer's ~184 us on an H100, bench/results/cuda-kv-decode-attention-h100-ac3dd74.md).
// The bits are merge_global_chunks': the same prefix maxima, exp2f arguments and chains in chunk
// order. The next stage's states are loaded before this stage's chain runs.
__global__ void __launch_bounds__(32) attention_decode_merge_kernel(DeviceAttentionMeta meta,
                                                                     const int32_t* __restrict__ rows,
                                                                     AttentionShape s, int max_chunks,
                                                                     const float* __restrict__ partial,
                                                                     float* __restrict__ out) {
  pdl_enter();  // the chunk states
  const int i = blockIdx.x, h = blockIdx.y, lane = threadIdx.x, d = blockIdx.z * 32 + lane;
  const int D = s.head_dim, SW = state_words(D);
  const int r = rows[i];
  const int32_t pos = meta.positions[r];
  const int lo = first_key(pos, s);
  const int c_begin = lo / kChunkKeys, c_end = pos / kChunkKeys + 1;
  const float* __restrict__ states = partial + (static_cast<int64_t>(i) * s.num_heads + h) * max_chunks * SW;
  float m_cur, l_cur, o_cur[32], m_next = -INFINITY, l_next = 0.f, o_next[32] = {};
  const auto load = [&](int c0, float& m, float& l, float(&o)[32]) {
    const int n = min(32, c_end - c0);
    m = lane < n ? states[static_cast<int64_t>(c0 + lane) * SW] : -INFINITY;
    l = lane < n ? states[static_cast<int64_t>(c0 + lane) * SW + 1] : 0.f;
#pragma unroll
    for (int j = 0; j < 32; ++j) o[j] = j < n && d < D ? states[static_cast<int64_t>(c0 + j) * SW + kStateHeader + d] : 0.f;
  };
  float M = -INFINITY, L = 0.f, A = 0.f;
  load(c_begin, m_cur, l_cur, o_cur);
  for (int c0 = c_begin; c0 < c_end; c0 += 32) {
    if (c0 + 32 < c_end) load(c0 + 32, m_next, l_next, o_next);
    const int n = min(32, c_end - c0);
    float fo, fn;
    const float P = stage_merge_factors(M, m_cur, lane, fo, fn);
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      if (j >= n) break;
      const float fo_j = __shfl_sync(~0u, fo, j), fn_j = __shfl_sync(~0u, fn, j), l_j = __shfl_sync(~0u, l_cur, j);
      L = fmaf(l_j, fn_j, L * fo_j);
      A = fmaf(o_cur[j], fn_j, A * fo_j);
    }
    M = __shfl_sync(~0u, P, n - 1);
    m_cur = m_next;
    l_cur = l_next;
#pragma unroll
    for (int j = 0; j < 32; ++j) o_cur[j] = o_next[j];
  }
  float rescale, inv;
  finish_factors(M, L, s.sinks, h, rescale, inv);
  if (d < D) out[(static_cast<int64_t>(r) * s.num_heads + h) * D + d] = A * rescale * inv;
}

// Chunks from which the states are merged by attention_decode_merge_kernel: one launch more, so
// only where the last CTA's merge outweighs it. H100, the Qwen3-8B shape: 512 chunks at batch 1
// (32k keys) 181.7 -> 120.8 us per layer, 128 chunks at batch 32 (8k keys) 833 -> 790 us.
constexpr int kMergeApartMinChunks = 64;

std::atomic<int64_t> g_merge_launches{0};
}  // namespace

int64_t attention_decode_merge_launches() { return g_merge_launches.load(); }

bool attention_decode_fits(int head_dim, int group) {
  return std::min(decode_smem_bytes(head_dim, group, false, false), decode_smem_bytes(head_dim, group, false, true)) <=
         device_arch().smem_per_block;
}

int decode_chunks(int32_t max_position) { return max_position / kChunkKeys + 1; }

size_t decode_workspace_bytes(int64_t rows, int num_heads, int head_dim, int max_chunks) {
  return static_cast<size_t>(rows * num_heads * max_chunks * state_words(head_dim)) * sizeof(float);
}

void attention_decode(const float* q, const QkPrologue* prologue, const DeviceAttentionMeta& meta,
                      const int32_t* rows, int num_rows, int max_chunks, const KvPair& kv,
                      const AttentionShape& shape, float* workspace, unsigned* counters, float* out,
                      cudaStream_t stream) {
  if (num_rows == 0) return;
  if (prologue && kv_format_rotates_keys(kv.format()))
    fail_unsupported("decode attention prologue over keys stored rotated (format)", kv.format_id);
  if (prologue && !prologue_supported(*prologue)) fail_unsupported("decode attention prologue head_dim", prologue->head_dim);
  const int D = shape.head_dim, group = shape.num_heads / shape.num_kv_heads;
  check_head_dim(D);
  if (group > kMaxGroup) fail_unsupported("decode attention query heads per KV head", group);
  const DeviceArch& arch = device_arch();
  // K and V apart only where they do not fit together (or forced: tests).
  const bool kv_apart =
      attention_kv_apart_forced() || decode_smem_bytes(D, group, false, false) > arch.smem_per_block;
  // Clusters (Hopper) only while every CTA has an SM of its own: with more, a cluster's CTAs are
  // placed together and hold their SMs until the merging CTA has read them, so later CTAs start
  // later (H200, batch 8, 512 CTAs: decode 2-4% slower than merging through global memory).
  const int64_t ctas = static_cast<int64_t>(num_rows) * shape.num_kv_heads * max_chunks;
  const bool cluster = !kv_apart && arch.hopper && max_chunks <= kMaxDecodeCluster && ctas <= arch.sms &&
                       decode_smem_bytes(D, group, true, false) <= arch.smem_per_block;
  const bool merge_apart = !cluster && max_chunks >= kMergeApartMinChunks;
  const size_t smem = decode_smem_bytes(D, group, cluster, kv_apart);
  if (smem > arch.smem_per_block)
    fail_unsupported("decode attention shared memory per block on this GPU (query heads per KV head x head_dim), bytes",
                     static_cast<int64_t>(smem));
  const unsigned rows_u = static_cast<unsigned>(num_rows), heads_u = static_cast<unsigned>(shape.num_kv_heads),
                 chunks_u = static_cast<unsigned>(max_chunks);
  auto decode = [&](auto kernel, dim3 grid, unsigned cluster_x) {
    if (smem > 48 * 1024)
      TACHYON_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    launch_clustered(kernel, grid, 128, smem, stream, cluster_x, q, prologue ? *prologue : QkPrologue{},
                     prologue != nullptr, meta, rows, kv, shape, max_chunks, workspace,
                     merge_apart ? nullptr : counters, out);
  };
  const auto merge = [&] {
    if (!merge_apart) return;
    g_merge_launches.fetch_add(1);
    launch(attention_decode_merge_kernel, dim3(rows_u, static_cast<unsigned>(shape.num_heads), static_cast<unsigned>(D + 31) / 32), 32, 0,
           stream, meta, rows, shape, max_chunks, static_cast<const float*>(workspace), out);
  };
  if (kv_apart) {
    count_attention_kv_apart_launch(true);
    const dim3 grid(rows_u, heads_u, chunks_u);
    if (D == 256) decode(attention_decode_kernel<32, false, true>, grid, 1u);
    else decode(attention_decode_kernel<0, false, true>, grid, 1u);
    merge();
    return;
  }
  auto pick = [&](auto dk) {
    constexpr int DK = decltype(dk)::value;
    if (cluster) decode(attention_decode_kernel<DK, true>, dim3(chunks_u, heads_u, rows_u), chunks_u);
    else decode(attention_decode_kernel<DK, false>, dim3(rows_u, heads_u, chunks_u), 1u);
  };
  if (D == 64) pick(std::integral_constant<int, 8>{});
  else if (D == 128) pick(std::integral_constant<int, 16>{});
  else if (D == 256) pick(std::integral_constant<int, 32>{});
  else pick(std::integral_constant<int, 0>{});
  merge();
}

}  // namespace tachyon::kernels::cuda
