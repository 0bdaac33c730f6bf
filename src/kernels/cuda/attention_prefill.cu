// The query-tile attention kernel on mma.sync (prefill and chunked prefill; every device), and the
// plan that sends short runs of rows to the decode kernel; on sm_90a the wgmma kernel
// (attention_wgmma.cu) takes head_dim 64 and 128 of f32, bf16 and f16 caches with the same bits.
#include "kernels/cuda/attention_prefill.cuh"

#include <optional>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_wgmma.cuh"

namespace tachyon::kernels::cuda {
namespace {

// ---- query tiles (prefill, chunked prefill) ----------------------------------------------
// CTA (query tile, KV head, head chunk): up to 16 (row, head) pairs sharing one KV head per warp
// (per two warps when head_dim > 128: each holds half of the d tiles). The CTA stages each
// 64-key chunk once (the next one's copies in flight during this one's MMAs where two chunk
// buffers fit); every warp computes its pairs' scores and p (chunk_softmax), merges the chunk
// into its running state and accumulates p·v into it. Tiles run in reverse order: a sequence's
// last tiles have the most keys and start first.
//
// Shape, by measurement (docs/perf/cuda.md): 8 warps
// (128 pairs, half the L2 reads of K and V per FLOP) with two chunk buffers ran 10-12% faster
// than 4 warps with one; 4 warps with two buffers (one CTA per SM) ran 1.7x slower. Where the
// GPU's shared memory per block is smaller, tile_variant takes one buffer, then 2 warps (head_dim
// 128 at sm_86/89's 99 KB, 256 at sm_80's 163 KB), then 2 warps with K and V apart (attention.cuh:
// head_dim 256 at 99 KB: 82 KB where K and V together take 147 KB); the 4-warp kernels are no
// longer built (the 2-warp ones took their place: the same number of instantiations).
struct TileVariant {
  int warps, stages;
  bool kv_apart = false;  // one buffer, K then V (2 warps, 1 stage)
};
TileVariant g_tile_variant{8, 2};

__host__ __device__ inline int d_parts(int D) { return (D / 8 + kMaxDTilesPerWarp - 1) / kMaxDTilesPerWarp; }
__host__ __device__ inline int tile_pairs(int D, int warps) { return 16 * (warps / d_parts(D)); }

__host__ __device__ inline int chunk_smem_words(int D) { return kChunkKeys * (qk_stride(D) + v_stride(D)); }
// The buffer that holds a chunk's K, then its V (K and V apart).
__host__ __device__ inline int apart_chunk_smem_words(int D) { return kChunkKeys * max(qk_stride(D), v_stride(D)); }
// Dynamic and static shared memory of a CTA of `v`'s shape (the static arrays: the tile's key
// windows and the chunk's slots, attention_kernel and attention_common.cuh).
size_t tile_smem_bytes(int D, TileVariant v) {
  const size_t chunks = v.kv_apart ? apart_chunk_smem_words(D) : static_cast<size_t>(v.stages) * chunk_smem_words(D);
  return (static_cast<size_t>(tile_pairs(D, v.warps)) * qk_stride(D) + chunks) * 4;
}
size_t tile_static_smem_bytes(TileVariant v) { return 2 * 16 * v.warps * sizeof(int32_t) + kChunkKeys * sizeof(int64_t); }
// The variant set (g_tile_variant) where the device's shared memory per block holds it, else the
// largest that fits: one chunk buffer, then fewer warps, then K and V apart (Ampere and Ada hold
// 163 / 99 KB, not Hopper's 227: head_dim 128 on 99 KB takes 2 warps and one buffer, head_dim 256
// K and V apart). force_attention_kv_apart: K and V apart wherever it fits. The bits do not
// depend on the variant.
bool tile_fits(int D, TileVariant v) {
  return tile_smem_bytes(D, v) + tile_static_smem_bytes(v) <= device_arch().smem_per_block;
}
std::optional<TileVariant> fitting_tile_variant(int D) {
  constexpr TileVariant kApart{2, 1, true};
  if (attention_kv_apart_forced()) return tile_fits(D, kApart) ? std::optional(kApart) : std::nullopt;
  TileVariant v = g_tile_variant;
  if (tile_fits(D, v)) return v;
  v.stages = 1;
  if (!tile_fits(D, v)) v.warps = 2;
  if (!tile_fits(D, v)) v = kApart;
  if (!tile_fits(D, v)) return std::nullopt;
  return v;
}
TileVariant tile_variant(int D) {
  const std::optional<TileVariant> v = fitting_tile_variant(D);
  if (!v)
    fail_unsupported("prefill attention head_dim on this GPU's shared memory per block (one 64-key chunk of K)", D);
  return *v;
}
int tile_pairs(int D) { return tile_pairs(D, tile_variant(D).warps); }

// DT: d tiles per warp (head_dim <= 8 · DT · d_parts); DK: head_dim / 8 when fixed at compile
// time (constant strides and unrolled loops), 0 to read it from the shape. kKvApart: one chunk
// buffer that holds K for the scores, then V for p·v (attention.cuh; `stages` is 1), else K and V
// staged together in `stages` buffers.
template <int DT, int WARPS, int DK, bool kKvApart = false>
__global__ void __launch_bounds__(32 * WARPS, 8 / WARPS) attention_kernel(
    const float* __restrict__ q, DeviceAttentionMeta meta, const QueryTile* __restrict__ tiles,
    const __grid_constant__ KvPair kv, AttentionShape s, int heads_per_chunk, int stages, float* __restrict__ out) {
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

  if constexpr (kKvApart) {
    // Per chunk: K staged, the scores and p; every warp's reads of K done, V staged over it; p·v.
    // The next chunk's K is staged once every warp has read V (no copy in flight during MMAs).
    // The windows, scores, merge and p·v are the arithmetic of the loop of K and V together below,
    // written out again so that the code of the variants Hopper runs stays as it was.
    // The chunk's state merged into the running one (M, L, A) and its p·v accumulated: the lane's
    // rows whose chunk has a valid key (m > -inf).
    auto accumulate = [&](const float(&p)[kChunkTiles][4], const float(&m)[2], const float(&l)[2], const float* vs) {
      float fo[2], fn[2];
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
    };
    // The lane's rows' keys in chunk c0 (lo > hi: none); whether any lane of the warp has one.
    auto chunk_windows = [&](int c0) {
      bool any = false;
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        lo[i] = max(row_lo[i], c0) - c0;
        hi[i] = min(row_pos[i], c0 + kChunkKeys - 1) - c0;
        any |= lo[i] <= hi[i];
      }
      return __any_sync(0xffffffffu, any);
    };
    auto stage_k = [&](int c0) {
      stage_chunk<ChunkRows::K>(kv, table, s.block_size, kvh, D, c0, kmin, kmax, [](int j) { return j; }, chunk_buf,
                                chunk_buf);
    };
    const int c_first = kmin / kChunkKeys * kChunkKeys;
    stage_k(c_first);
    for (int c0 = c_first; c0 <= kmax; c0 += kChunkKeys) {
      cp_async_wait<0>();
      __syncthreads();
      const bool any = chunk_windows(c0);
      float p[kChunkTiles][4], m[2], l[2];
      if (any) {
        chunk_scores<DK>(qs + pair0 * qk_stride(D), 16, chunk_buf, D, p);
        chunk_softmax(p, lo, hi, s.scale, s.softcap, m, l);
      }
      __syncthreads();
      // The slots stage_k looked up (chunk_slot_s) serve V too.
      copy_chunk_rows<kTileStageBatch, ChunkRows::V>(kv, D, c0, 0, kChunkKeys, 1, 0, chunk_buf, chunk_buf);
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();
      if (any) accumulate(p, m, l, chunk_buf);
      __syncthreads();
      if (c0 + kChunkKeys <= kmax) stage_k(c0 + kChunkKeys);
    }
    write_tile_rows(tp, pair0, s, D, nt_begin, nt_end, M, L, A, out);
    return;
  }

  auto stage = [&](int c0, int buffer) {
    float* ks = chunk_buf + buffer * chunk_smem_words(D);
    stage_chunk(kv, table, s.block_size, kvh, D, c0, kmin, kmax, [](int j) { return j; }, ks,
                ks + kChunkKeys * qk_stride(D));
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

int heads_per_chunk(int group, int head_dim) { return std::min(group, tile_pairs(head_dim)); }
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
               const KvPair& kv, const AttentionShape& shape, float* out, cudaStream_t stream) {
  if (num_tiles == 0) return;
  const int D = shape.head_dim;
  check_head_dim(D);
  const int group = shape.num_heads / shape.num_kv_heads, hpc = heads_per_chunk(group, D);
  // The wgmma kernel reads f32, bf16 and f16 caches; the other formats take the mma.sync kernel,
  // which dequantizes as it stages (the same bits either way).
  if (attention_wgmma_reads(kv.format()) && attention_wgmma_supported(D) && !attention_kv_apart_forced())
    return attention_wgmma(q, meta, tiles, num_tiles, kv, shape, hpc, out, stream);
  const int chunks = (group + hpc - 1) / hpc;
  const TileVariant variant = tile_variant(D);
  const int stages = variant.stages;
  const size_t smem = tile_smem_bytes(D, variant);
  const dim3 grid(static_cast<unsigned>(num_tiles), static_cast<unsigned>(shape.num_kv_heads * chunks));
  auto go = [&](auto kernel, int warps) {
    if (smem > 48 * 1024)
      TACHYON_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    launch(kernel, grid, 32 * warps, smem, stream, q, meta, tiles, kv, shape, hpc, stages, out);
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
  if (variant.kv_apart) {
    count_attention_kv_apart_launch(false);
    if (D == 256) go(attention_kernel<16, 2, 32, true>, 2);
    else go(attention_kernel<kMaxDTilesPerWarp, 2, 0, true>, 2);
  } else if (variant.warps == 8) {
    pick(std::integral_constant<int, 8>{});
  } else {
    pick(std::integral_constant<int, 2>{});
  }
}

bool attention_fits(int head_dim, int group) {
  return fitting_tile_variant(head_dim).has_value() && attention_decode_fits(head_dim, group);
}

void set_attention_tile_variant(int warps, int stages) {
  if ((warps != 2 && warps != 8) || (stages != 1 && stages != 2)) fail_unsupported("attention tile variant", warps * 10 + stages);
  g_tile_variant = {warps, stages};
}

}  // namespace tachyon::kernels::cuda
