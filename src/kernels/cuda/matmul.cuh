// Matmul over bf16 fragment-packed weights: out[M, N] = x[M, K] · Wᵀ (+ bias), x and out f32.
//
// Several kernels, one arithmetic: every output is reduced in the canonical order of common.cuh
// (fixed k segments, one m16n8k16 MMA chain per segment, segment sums in order), with x
// rounded to bf16. So a row's bits do not depend on M, on its place in the batch, or on
// which kernel ran:
//  - decode (M <= 8) of matrices of 8 MB or more: the streaming kernel (matmul_stream.cuh);
//  - other decode (M <= 64), chosen by shape (kDecodeAuto): split-K, one warp per (8 output
//    columns, 512-k segment), the whole segment's weights loaded before the first MMA (and
//    before waiting for the previous kernel), x staged per CTA as bf16 A fragments, segment
//    sums added in order by the last CTA of each column group; or, for wide matrices with
//    k <= 4096 at M <= 16, the skinny kernel (4 n-tiles per CTA, its 8 warps split k by
//    segment); the other skinny variants are kept for the kernel lab;
//  - batched decode (17-64 rows): x converted once to A fragments; for wide matrices a CTA
//    stages each k segment's fragments in shared memory and reuses them over 16 n-tiles
//    (weights read once, x from L2 once per 16 n-tiles); else the skinny kernel with 2-4
//    m-tiles per warp;
//  - tiled (M > 64, prefill): 128x128 tiles, x first converted to A fragments, a 4-stage
//    cp.async pipeline; on Hopper (sm_90a) with the weight's core-matrix copy, tiles of 128 rows x
//    128 or 192 columns on wgmma, warp-specialized (a producer warpgroup fills a ring by TMA, two
//    consumer warpgroups of m64n128k16 or m64n192k16; x and the weight both in core-matrix order,
//    one stage of wgmmas kept in flight).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "kernels/cuda/matmul_pack.cuh"
#include "kernels/cuda/matmul_wgmma.cuh"

namespace tachyon::kernels::cuda {

// Workspace bytes `matmul` needs for x [rows, k] times W [n, k]ᵀ.
size_t matmul_workspace_bytes(int64_t rows, int64_t n, int64_t k);
// Number of zero-initialised counters the split-K kernel needs for n output features; the
// kernel leaves them zero again (stream-ordered reuse by every matmul).
size_t matmul_counter_count(int64_t n);
// w: fragment-packed [n, k]; w_core: its core-matrix copy or null (M > 64 then runs the wgmma
// kernel: sm_90a devices only); bias: [n] f32 or null; workspace: matmul_workspace_bytes bytes;
// counters: matmul_counter_count(n) zeroed unsigned ints.
void matmul(const float* x, int64_t rows, const void* w, const void* w_core, int64_t n, int64_t k, const float* bias,
            float* out, void* workspace, unsigned* counters, cudaStream_t stream);

// Whether `matmul` runs x [rows, k] · Wᵀ [n, k] on the streaming kernel (matmul_stream.cuh).
bool matmul_streams(int64_t rows, int64_t n, int64_t k);
// add_rms_norm (norm: matmul_stream.cuh) then out = norm.out · Wᵀ (+ bias) as one launch of the
// streaming kernel; only where matmul_streams. The caller checks add_rms_norm_is_wide (the bits
// to reproduce).
struct StreamAddNorm;
void matmul_after_add_norm(const StreamAddNorm& norm, int64_t rows, const void* w, int64_t n, int64_t k,
                           const float* bias, float* out, cudaStream_t stream);

// Kernel lab (bench/cuda): which kernel serves M <= 64. All are bit-identical (the canonical
// order); they differ in how they stream weights and read x. Default: the fastest measured.
enum DecodeMatmulVariant {
  kDecodeWide = 0,        // 4 n-tiles per CTA, 4 k-pairs per load batch
  kDecodeMedium = 1,      // 2 n-tiles, 8 k-pairs
  kDecodeNarrow = 2,      // 1 n-tile, a whole segment (16 k-pairs)
  kDecodeStaged = 3,      // 1 n-tile, x staged per CTA in shared memory
  kDecodeWideDeep = 4,    // 4 n-tiles, 8 k-pairs
  kDecodeMediumDeep = 5,  // 2 n-tiles, 16 k-pairs
  kDecodeSplitK = 6,        // M <= 64: one warp per (n-tile, segment), last CTA sums the segments
  kDecodeSplitKShared = 7,  // the same with the weights through shared memory (cp.async) at M <= 8
  kDecodeAuto = 8,          // by shape: at M <= 16 kDecodeWide for n >= 16384 and k <= 4096, else split-K;
                            // at 17-64 rows kDecodeBatched for n >= 16384, else the skinny kernel
  kDecodeBatched = 9,       // 17-64 rows: A fragments staged per CTA and segment, reused over 16 n-tiles;
                            // k split across CTAs (segment sums summed in order) only for short n
  kDecodeBatchedWhole = 10, // the same, every CTA over all of k (no split)
  kDecodeStream = 11,       // M <= 8: one CTA per SM streams its n-tiles through a TMA-filled ring (matmul_stream.cuh)
  kDecodeAutoClassic = 12,  // kDecodeAuto as before the streaming kernel (for A/B runs)
};
void set_decode_matmul_variant(int variant);

}  // namespace tachyon::kernels::cuda
