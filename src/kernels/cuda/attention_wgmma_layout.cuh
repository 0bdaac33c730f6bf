// The wgmma query-tile attention kernel's (attention_wgmma.cu) CTA pairs, shared-memory layout of
// q, K and V^T (a producer warpgroup filling a ring of slots) and its per-chunk steps.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/attention_chunk.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace tachyon::kernels::cuda {

constexpr int kWgmmaPairs = 128;  // (row, head) pairs per CTA: two warpgroups of 64

// Shared memory for head_dim D, in 4-byte words. Every operand wgmma reads is in core-matrix
// order (8 rows x 4 words, no swizzle; wgmma.cuh):
//  q      [D/4 column blocks][16 pair blocks][8][4]: lbo 2 KB, sbo 128 B; warpgroup w's 8 pair
//         blocks start at block 8w.
//  k      per chunk [D/4][8 key blocks][8][4], column blocks kKL words apart: lbo 1088 B
//         (64 mod 128, so that the 8 lanes of a cp.async wavefront hit 8 distinct 16-byte
//         slots), sbo 128 B. Column block c holds d 4c .. 4c + 3: step b of the score chain
//         (d 8b .. 8b + 7) is blocks 2b, 2b + 1.
//  vt     V transposed, p·v's B operand ([d][key] is k-major; tf32 wgmma has no transpose):
//         [16 logical-k blocks][D/8 d blocks, kVS words apart][8 d][4 keys]; logical-k block
//         2i + e of key step i holds keys 8i + e, 8i + e + 2, 8i + e + 4, 8i + e + 6 (chunk_pv's
//         permuted k, so that p comes from the score registers as they are); lbo 4 kVL bytes,
//         sbo 160 B: the transposing stores of a warp hit 32 distinct banks.
// q and two slots of (K, vt) (212.5 KB at D = 128; 106.5 KB at D = 64).
template <int D>
struct WgmmaLayout {
  static constexpr int kQL = kWgmmaPairs / 8 * 32;
  static constexpr int kKL = kChunkKeys / 8 * 32 + 16;
  static constexpr int kVS = 40;
  static constexpr int kVL = D / 8 * kVS + 4;
  static constexpr int q_words = D / 4 * kQL;
  static constexpr int k_words = D / 4 * kKL;
  static constexpr int vt_words = kChunkKeys / 4 * kVL;
  static constexpr int ring_slots = 2;
  static constexpr int slot_words = k_words + vt_words;  // one ring slot: K, then vt
  // The ring kernel's q, its slots, then its mbarriers (full and empty per slot).
  static constexpr size_t ring_bytes =
      static_cast<size_t>(q_words + ring_slots * slot_words) * 4 + 2 * ring_slots * sizeof(uint64_t);
};

// The grid: (query tile, KV head x chunk of its query heads).
inline dim3 query_tile_grid(int num_tiles, const AttentionShape& shape, int heads_per_chunk) {
  const int group = shape.num_heads / shape.num_kv_heads, chunks = (group + heads_per_chunk - 1) / heads_per_chunk;
  return dim3(static_cast<unsigned>(num_tiles), static_cast<unsigned>(shape.num_kv_heads * chunks));
}

#if defined(__CUDACC__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
// One 64-key chunk of a consumer warpgroup, in the steps the kernel runs in this order (its
// synchronisation between them). Scores: sc = q·K^T as D/8
// wgmma.m64n64k8 (q and K from shared memory), issued and committed, not waited for.
template <int D>
__device__ __forceinline__ void issue_chunk_scores(float (&sc)[kChunkTiles][4], const uint32_t* qa, const float* ks) {
  using L = WgmmaLayout<D>;
  float(&flat)[4 * kChunkTiles] = reinterpret_cast<float(&)[4 * kChunkTiles]>(sc);
  // The chain starts by scale-d 0 (d = A · B) instead of from cleared accumulators: the same sums
  // (a zero's sign can differ only where every product is zero, and a score's sign of zero reaches
  // neither its exponential nor the row maximum's use). Each step's descriptors advance the first
  // ones by a constant.
  const uint64_t qd = core_descriptor(qa, L::kQL * 4, 128), kd = core_descriptor(ks, L::kKL * 4, 128);
  wgmma_fence();
#pragma unroll
  for (int b = 0; b < D / 8; ++b)
    wgmma_m64n64k8_tf32(flat, advance_descriptor(qd, 2 * b * L::kQL * 4), advance_descriptor(kd, 2 * b * L::kKL * 4),
                        b > 0);
  wgmma_commit();
}
// The retired scores' softmax of N chunks (independent states: chunks_softmax), chunk c over the
// lane's two rows' keys from c0[c], and the factors that merge them into the running state M, L in
// chunk order (merge_factors; fo 1, fn 0 for a row without a valid key). m: the chunks' maxima.
template <int N>
__device__ __forceinline__ void chunks_softmax_factors(float (&sc)[N][kChunkTiles][4], const int32_t (&row_lo)[2],
                                                       const int32_t (&row_pos)[2], const int (&c0)[N],
                                                       const AttentionShape& s, float (&M)[2], float (&L)[2],
                                                       float (&m)[N][2], float (&fo)[N][2], float (&fn)[N][2]) {
  int lo[N][2], hi[N][2];
  float l[N][2];
#pragma unroll
  for (int c = 0; c < N; ++c)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      lo[c][i] = max(row_lo[i], c0[c]) - c0[c];
      hi[c][i] = min(row_pos[i], c0[c] + kChunkKeys - 1) - c0[c];
    }
  chunks_softmax<N>(sc, lo, hi, s.scale, s.softcap, m, l);
#pragma unroll
  for (int c = 0; c < N; ++c)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      fo[c][i] = 1.f, fn[c][i] = 0.f;
      if (m[c][i] != -INFINITY) merge_factors(M[i], L[i], m[c][i], l[c][i], fo[c][i], fn[c][i]);
    }
}
__device__ __forceinline__ void chunk_softmax_factors(float (&sc)[kChunkTiles][4], const int32_t (&row_lo)[2],
                                                      const int32_t (&row_pos)[2], int c0, const AttentionShape& s,
                                                      float (&M)[2], float (&L)[2], float (&m)[2], float (&fo)[2],
                                                      float (&fn)[2]) {
  const int c0s[1] = {c0};
  chunks_softmax_factors<1>(reinterpret_cast<float(&)[1][kChunkTiles][4]>(sc), row_lo, row_pos, c0s, s, M, L,
                            reinterpret_cast<float(&)[1][2]>(m), reinterpret_cast<float(&)[1][2]>(fo),
                            reinterpret_cast<float(&)[1][2]>(fn));
}
// o = p·v as 8 wgmma.m64nDk8 with p from the score registers and V^T from shared memory, issued
// and committed, not waited for.
template <int D>
__device__ __forceinline__ void issue_chunk_pv(float (&o)[D / 2], const float (&sc)[kChunkTiles][4], const float* vt) {
  using L = WgmmaLayout<D>;
  // As the scores: scale-d 0 first (o's sign of zero cannot reach A: merge_chunk_output adds it to
  // A · fo, never -0), descriptors advanced.
  const uint64_t vd = core_descriptor(vt, L::kVL * 4, L::kVS * 4);
  wgmma_fence();
#pragma unroll
  for (int j = 0; j < kChunkTiles; ++j) {
    const uint32_t a[4] = {__float_as_uint(sc[j][0]), __float_as_uint(sc[j][2]), __float_as_uint(sc[j][1]),
                           __float_as_uint(sc[j][3])};
    const uint64_t b = advance_descriptor(vd, 2 * j * L::kVL * 4);
    if constexpr (D == 128) wgmma_m64n128k8_tf32(o, a, b, j > 0);
    else wgmma_m64n64k8_tf32(o, a, b, j > 0);
  }
  wgmma_commit();
}
// The retired chunk output into the running accumulators: A = A·fo + o·fn per row with a key.
template <int DT>
__device__ __forceinline__ void merge_chunk_output(float (&A)[DT][4], const float (&o)[4 * DT], const float (&m)[2],
                                                   const float (&fo)[2], const float (&fn)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (m[r] == -INFINITY) continue;  // no valid key for this row: its state stays
#pragma unroll
    for (int i = 0; i < DT; ++i)
#pragma unroll
      for (int e = 2 * r; e < 2 * r + 2; ++e) A[i][e] = fmaf(o[4 * i + e], fn[r], A[i][e] * fo[r]);
  }
}
#endif

}  // namespace tachyon::kernels::cuda
