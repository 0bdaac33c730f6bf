// The arithmetic of attention over one 64-key chunk on tensor cores, shared by the query-tile
// kernel (prefill, chunked prefill) and the split-KV decode kernel (attention.cu), so that a
// row's bits never depend on which kernel ran it.
//
// The canonical reduction of one (row, head): keys are cut into chunks of kChunkKeys aligned to
// absolute positions. For each chunk with at least one valid key:
//   s  = scale · log2(e) · q·k over d (scores in base-2 units: p is one ex2), q·k one chain of
//        mma.m16n8k8 (tf32 in, f32 accumulate) over 8-wide d steps in order from zero (k index i
//        of step b ↔ d 8b + i: the order in which shared memory's core matrices hold d, so that
//        the wgmma kernel (attention_wgmma.cu) reads K as cp.async placed it); softcapped (in
//        natural units, then scaled); -inf where the key is masked;
//   m  = max of s; p = tf32(2^(s - m)) (0 where masked); l = the sum of p in the fixed order
//        of chunk_softmax;
//   o  = p·v, per 8-wide d tile one chain of mma.m16n8k8 over the chunk's 8-key steps in order
//        from zero;
// and the chunk states (m, l, o) are merged in chunk order by merge_factors (the first merge
// into M = -inf, L = 0, A = 0 yields the chunk's own state). Sinks and the normalisation come
// last (finish_factors).
//
// Built with TACHYON_ATTENTION_BF16 (CMake option of that name) the operands are bf16 instead:
// q, k, p and v rounded to bf16 (round to nearest even), s one chain of mma.m16n8k16 (bf16 in,
// f32 accumulate) over 16-wide d steps (k index i of step b ↔ d 16b + i, the order the ring
// kernel's wgmma reads from 16-byte rows of 8 d; head_dim % 16 == 8 ends with one m16n8k8), o one
// chain per d tile over the chunk's 16-key steps (k index = key - 16·step, so p comes straight
// from the score registers of tiles 2·step and 2·step + 1): half the MMAs of the tf32 chains and
// twice the tensor rate. The values stay f32 in memory (bf16 ones), packed into bf16 pairs as
// the fragments are built. What it costs in accuracy, measured on the CPU oracle with the same
// rounding: bench/precision/attention_operands.cpp.
//
// An MMA output element depends only on its row of A and its column of B, so a row's result
// does not depend on the other rows of its 16-row tile (other heads, other positions, padding).
// q and k fragments come by ldmatrix (an 8 x 8 b16 matrix is 8 rows of four tf32 values: lane
// 4g + t gets row g, value t, the mma's fragment layout). p·v's logical k index is permuted so
// that p comes straight from the score registers (k index t of a key step ↔ key 2t, t + 4 ↔
// 2t + 1: the accumulator layout holds columns 2t, 2t + 1), with no shuffle.
#pragma once

#include <cstdint>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mma.cuh"

#ifndef TACHYON_ATTENTION_BF16
#define TACHYON_ATTENTION_BF16 0
#endif

namespace tachyon::kernels::cuda {

constexpr int kChunkKeys = 64;
constexpr int kChunkTiles = kChunkKeys / 8;  // 8-key tiles of s per chunk

// Shared-memory row strides (in 4-byte words) for head_dim D (a multiple of 8): q and K are read
// by ldmatrix, 8 rows of 16 bytes per phase: conflict-free when the stride is 4 mod 8 (bf16
// operands: 16 bytes at (row g, word 4t) by lane 4g + t, conflict-free at 16 mod 32); V is read
// as scalars at (key 2t, column g): conflict-free when the stride is 4 mod 16. All keep rows
// 16-byte aligned for cp.async.
__host__ __device__ inline int qk_stride(int D) {
  return TACHYON_ATTENTION_BF16 ? D + (48 - D % 32) % 32 : D + 4;
}
__host__ __device__ inline int v_stride(int D) { return D + (20 - D % 16) % 16; }

#ifdef __CUDACC__
// The cache slot of logical position `position` of a sequence whose block table is `table`.
// Block sizes are powers of two in practice: shifts then, not a 32-bit division (~20
// instructions per key, the largest cost of staging a chunk: docs/perf/cuda.md).
__device__ __forceinline__ int64_t kv_slot(const int32_t* table, int32_t position, int block_size) {
  if ((block_size & (block_size - 1)) == 0) {
    const int shift = __ffs(block_size) - 1;
    return (static_cast<int64_t>(table[position >> shift]) << shift) + (position & (block_size - 1));
  }
  return static_cast<int64_t>(table[position / block_size]) * block_size + position % block_size;
}

// tf32 rounding to nearest, ties away from zero (cvt.rna.tf32.f32's rounding), as integer ops:
// half a tf32 ulp added to the magnitude, the low 13 bits cleared (a conversion instruction runs
// at a fraction of the rate: docs/perf/cuda.md). Finite inputs only. K and V are stored in the
// cache already rounded (write_kv and the fused prologue), so the MMAs read them as they are.
__device__ __forceinline__ uint32_t to_tf32(float x) { return (__float_as_uint(x) + 0x1000u) & 0xffffe000u; }
// bf16 rounding to nearest even (__floats2bfloat162_rn's, base/dtype.h f32_to_bf16's), kept as the
// f32 bits of the rounded value. Finite inputs only.
__device__ __forceinline__ uint32_t to_bf16_bits(float x) {
  const uint32_t bits = __float_as_uint(x);
  return (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
}
// The attention MMAs' operand format (see the top of the file): what the cache, q and p hold.
__device__ __forceinline__ uint32_t to_operand(float x) {
  return TACHYON_ATTENTION_BF16 ? to_bf16_bits(x) : to_tf32(x);
}
__device__ __forceinline__ float round_operand(float x) { return __uint_as_float(to_operand(x)); }
// Two bf16 values held as f32 bits (low halves zero) as one bf16 pair, lo in the low half.
__device__ __forceinline__ uint32_t pack_operands(uint32_t lo, uint32_t hi) { return __byte_perm(lo, hi, 0x7632); }
__device__ __forceinline__ uint32_t pack_operands(float lo, float hi) {
  return pack_operands(__float_as_uint(lo), __float_as_uint(hi));
}

// d += a · b for one m16n8k8 tile, bf16 in, f32 accumulate (the head_dim % 16 == 8 tail).
__device__ __forceinline__ void mma_bf16_k8(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(b0));
}

// d += a · b for one m16n8k8 tile (tf32 in, f32 accumulate).
__device__ __forceinline__ void mma_tf32(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Four 8 x 8 b16 matrices from shared memory (lanes 8i .. 8i + 7 give the row addresses of
// matrix i); lane 4g + t gets word t of row g of each: for 32-bit values, the fragment layout of
// mma.m16n8k8's tf32 operands.
__device__ __forceinline__ void ldmatrix_x4(const void* row, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(row))));
}
// Two matrices (lanes 0 .. 15 give the addresses; the others' are ignored but must be valid).
__device__ __forceinline__ void ldmatrix_x2(const void* row, uint32_t& r0, uint32_t& r1) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r0), "=r"(r1)
               : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(row))));
}

constexpr float kLog2e = 1.4426950408889634f;
// 2^x, one MUFU instruction; subnormal results flush to zero (x <= -126: p rounds to nothing
// that matters next to the chunk's maximum, whose p is 1).
__device__ __forceinline__ float ex2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Raw scores of the warp's 16 pairs against the chunk's 64 keys. qs: the pairs' q as operand
// bits (to_operand; row stride qk_stride; rows at or past `q_rows` are not used: their scores
// are garbage the caller masks); ks: the chunk's K rows (operand values, row stride qk_stride).
// Lane 4g + t gets, for key tile j, s[j] = {(g, 8j + 2t), (g, 8j + 2t + 1), (g + 8, 8j + 2t),
// (g + 8, 8j + 2t + 1)}. tf32: step b's k index i ↔ d 8b + i; q's fragments by one ldmatrix.x4
// per step, k's of two steps by one ldmatrix.x4 per key tile. (bf16: step b's k index i ↔ d 16b + i,
// lane t reading d 2t, 2t + 1 and 8 + 2t, 9 + 2t of each 16-wide block by two 8-byte loads; for
// head_dim % 16 == 8 the last 8 are one MMA of 8-byte loads.) DT = head_dim / 8 when known at
// compile time (0: read D). J < kChunkTiles: only the key tiles j0 .. j0 + J - 1 (s[j] holds tile
// j0 + j): each tile is its own chain over d, so the same bits as in a call for all of them.
template <int DT, int J>
__device__ __forceinline__ void chunk_scores(const uint32_t* qs, int q_rows, const float* ks, int D,
                                             float (&s)[J][4], int j0 = 0) {
  static_assert(J >= 1 && J <= kChunkTiles, "a run of the chunk's key tiles");
  if constexpr (DT > 0) D = 8 * DT;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, S = qk_stride(D);
  ks += 8 * j0 * S;
#pragma unroll
  for (int j = 0; j < J; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
  const int D16 = D / 16 * 16;
  if constexpr (!TACHYON_ATTENTION_BF16) {
    // ldmatrix rows: q row (lane % 8) + 8 · (lane / 8 % 2) at column 4 · (lane / 16) of a step
    // (matrices: rows 0-7 / 8-15 × columns 0-3 / 4-7: a0, a1, a2, a3); k row lane % 8 of a key
    // tile at column 4 · (lane / 8) of a 16-wide block (b0, b1 of step 2b, b0, b1 of 2b + 1).
    const uint32_t* q_row = qs + min(lane % 8 + 8 * (lane / 8 % 2), q_rows - 1) * S + 4 * (lane / 16);
    const float* k_row = ks + (lane % 8) * S + 4 * (lane / 8);
#pragma unroll(DT > 0 ? DT / 2 : 1)
    for (int d0 = 0; d0 < D16; d0 += 16) {
      uint32_t a[2][4];
      ldmatrix_x4(q_row + d0, a[0][0], a[0][1], a[0][2], a[0][3]);
      ldmatrix_x4(q_row + d0 + 8, a[1][0], a[1][1], a[1][2], a[1][3]);
#pragma unroll
      for (int j = 0; j < J; ++j) {
        uint32_t b[4];
        ldmatrix_x4(k_row + 8 * j * S + d0, b[0], b[1], b[2], b[3]);
        mma_tf32(s[j], a[0][0], a[0][1], a[0][2], a[0][3], b[0], b[1]);
        mma_tf32(s[j], a[1][0], a[1][1], a[1][2], a[1][3], b[2], b[3]);
      }
    }
    if (D16 < D) {
      uint32_t a[4];
      ldmatrix_x4(q_row + D16, a[0], a[1], a[2], a[3]);
      const float* k_tail = ks + (lane % 8) * S + 4 * (lane / 8 % 2) + D16;
#pragma unroll
      for (int j = 0; j < J; ++j) {
        uint32_t b[2];
        ldmatrix_x2(k_tail + 8 * j * S, b[0], b[1]);
        mma_tf32(s[j], a[0], a[1], a[2], a[3], b[0], b[1]);
      }
    }
  } else {
    const bool row_a = g < q_rows, row_b = g + 8 < q_rows;
    const uint32_t* qa_row = qs + g * S;
    const uint32_t* qb_row = qs + (g + 8) * S;
    const float* k_row = ks + g * S;
#pragma unroll(DT > 0 ? DT / 2 : 1)
    for (int d0 = 0; d0 < D16; d0 += 16) {
      // k index 2t, 2t + 1 <-> d0 + 2t, d0 + 2t + 1; 2t + 8, 2t + 9 <-> d0 + 8 + 2t, d0 + 9 + 2t.
      const uint2 zero = make_uint2(0u, 0u);
      const uint2 qa0 = row_a ? *reinterpret_cast<const uint2*>(qa_row + d0 + 2 * t) : zero;
      const uint2 qa1 = row_a ? *reinterpret_cast<const uint2*>(qa_row + d0 + 8 + 2 * t) : zero;
      const uint2 qb0 = row_b ? *reinterpret_cast<const uint2*>(qb_row + d0 + 2 * t) : zero;
      const uint2 qb1 = row_b ? *reinterpret_cast<const uint2*>(qb_row + d0 + 8 + 2 * t) : zero;
      const uint32_t a[4] = {pack_operands(qa0.x, qa0.y), pack_operands(qb0.x, qb0.y), pack_operands(qa1.x, qa1.y),
                             pack_operands(qb1.x, qb1.y)};
#pragma unroll
      for (int j = 0; j < J; ++j) {
        const uint2 k0 = *reinterpret_cast<const uint2*>(k_row + 8 * j * S + d0 + 2 * t);
        const uint2 k1 = *reinterpret_cast<const uint2*>(k_row + 8 * j * S + d0 + 8 + 2 * t);
        mma_bf16(s[j], a, pack_operands(k0.x, k0.y), pack_operands(k1.x, k1.y));
      }
    }
    if (D16 < D) {
      const uint2 qa = row_a ? *reinterpret_cast<const uint2*>(qa_row + D16 + 2 * t) : make_uint2(0u, 0u);
      const uint2 qb = row_b ? *reinterpret_cast<const uint2*>(qb_row + D16 + 2 * t) : make_uint2(0u, 0u);
#pragma unroll
      for (int j = 0; j < J; ++j) {
        const uint2 k = *reinterpret_cast<const uint2*>(k_row + 8 * j * S + D16 + 2 * t);
        mma_bf16_k8(s[j], pack_operands(qa.x, qa.y), pack_operands(qb.x, qb.y), pack_operands(k.x, k.y));
      }
    }
  }
}

// chunk_softmax in phases, each over N chunks whose states are independent (the ring kernel's
// pairs of chunks): every phase of one chunk is the same arithmetic in the same order whatever N
// is, so the bits are chunk_softmax's; with N = 2 the two chunks' shuffles and exponentials are
// issued together (one basic block), two independent chains where one chunk has one.
//
// Scales, softcaps and masks the scores (keys [lo[i], hi[i]] of the chunk are valid for the lane's
// row i: 0 for g, 1 for g + 8; lo > hi: none) and takes each row's maximum over the lane's keys.
__device__ __forceinline__ void softmax_scale_mask(float (&s)[kChunkTiles][4], const int (&lo)[2], const int (&hi)[2],
                                                   float scale, float softcap, float (&m)[2]) {
  const int t = threadIdx.x % 4;
  m[0] = m[1] = -INFINITY;
  // Interior chunks (every key valid for both rows, no softcap): the same values without the
  // per-key window tests.
  // Both paths give a valid key the same value (the other path may serve the same row and chunk
  // in another kernel, where the lane's second row differs).
  const float scale2 = scale * kLog2e;
  if (softcap <= 0.f && lo[0] <= 0 && lo[1] <= 0 && hi[0] >= kChunkKeys - 1 && hi[1] >= kChunkKeys - 1) {
#pragma unroll
    for (int j = 0; j < kChunkTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[j][e] *= scale2;
        m[e / 2] = fmaxf(m[e / 2], s[j][e]);
      }
  } else {
#pragma unroll
    for (int j = 0; j < kChunkTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = e / 2, key = 8 * j + 2 * t + e % 2;
        float score = -INFINITY;
        if (key >= lo[i] && key <= hi[i])
          score = softcap > 0.f ? softcap * tanhf(s[j][e] * scale / softcap) * kLog2e : s[j][e] * scale2;
        s[j][e] = score;
        m[i] = fmaxf(m[i], score);
      }
  }
}

// The rows' maxima (max) or sums over the quad's four lanes, every chunk's and row's shuffles of a
// step issued together: the reduction waits for two shuffle round trips, not four per chunk
// (ptxas ran row 1's after row 0's; ncu found the waits on these round trips the softmax's largest
// stall in the ring kernel). The same maxima and sums in every lane.
template <bool kMax, int N>
__device__ __forceinline__ void quad_reduce(float (&v)[N][2]) {
#pragma unroll
  for (int step = 1; step <= 2; step *= 2) {
    float other[N][2];
#pragma unroll
    for (int c = 0; c < N; ++c)
#pragma unroll
      for (int i = 0; i < 2; ++i) other[c][i] = __shfl_xor_sync(0xffffffffu, v[c][i], step);
#pragma unroll
    for (int c = 0; c < N; ++c)
#pragma unroll
      for (int i = 0; i < 2; ++i) v[c][i] = kMax ? fmaxf(v[c][i], other[c][i]) : v[c][i] + other[c][i];
  }
}

// The scores into p in place (operand bits as floats) and the lane's part of each row's l.
__device__ __forceinline__ void softmax_exp(float (&s)[kChunkTiles][4], const float (&m)[2], float (&l)[2]) {
  l[0] = l[1] = 0.f;
  // A row without a valid key subtracts 0 instead of -inf: its masked scores give exp(-inf) = 0
  // like every masked score (no per-key test).
  const float m_sub[2] = {m[0] == -INFINITY ? 0.f : m[0], m[1] == -INFINITY ? 0.f : m[1]};
#pragma unroll
  for (int j = 0; j < kChunkTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = e / 2;
      // One ex2.approx.ftz, the same instruction in every kernel; p is rounded to the operand
      // format anyway (2^-inf = +0 stays 0).
      const float p = round_operand(ex2_ftz(s[j][e] - m_sub[i]));
      s[j][e] = p;
      l[i] += p;
    }
}

// N chunks' scores into p, with each row's m (-inf: no valid key) and l.
template <int N>
__device__ __forceinline__ void chunks_softmax(float (&s)[N][kChunkTiles][4], const int (&lo)[N][2],
                                               const int (&hi)[N][2], float scale, float softcap, float (&m)[N][2],
                                               float (&l)[N][2]) {
#pragma unroll
  for (int c = 0; c < N; ++c) softmax_scale_mask(s[c], lo[c], hi[c], scale, softcap, m[c]);
  quad_reduce<true>(m);
#pragma unroll
  for (int c = 0; c < N; ++c) softmax_exp(s[c], m[c], l[c]);
  quad_reduce<false>(l);
}

// One chunk's scores into p (operand bits as floats), with each row's m (-inf: no valid key) and l.
__device__ __forceinline__ void chunk_softmax(float (&s)[kChunkTiles][4], const int (&lo)[2], const int (&hi)[2],
                                              float scale, float softcap, float (&m)[2], float (&l)[2]) {
  chunks_softmax<1>(reinterpret_cast<float(&)[1][kChunkTiles][4]>(s), reinterpret_cast<const int(&)[1][2]>(lo),
                    reinterpret_cast<const int(&)[1][2]>(hi), scale, softcap, reinterpret_cast<float(&)[1][2]>(m),
                    reinterpret_cast<float(&)[1][2]>(l));
}

// o = p · v for the G d tiles nt0 .. nt0 + G - 1 (columns 8nt .. 8nt + 7; tiles at or past
// `nt_end` are skipped); vs: the chunk's V rows (operand values, row stride v_stride). Lane 4g + t
// gets o[i] = {(g, 8nt + 2t), (g, 8nt + 2t + 1), (g + 8, ...), ...} for nt = nt0 + i. Each tile's
// chain runs over the 8-key (bf16: 16-key) steps in order; the G chains are interleaved.
template <int G>
__device__ __forceinline__ void chunk_pv(const float (&p)[kChunkTiles][4], const float* vs, int D, int nt0,
                                         int nt_end, float (&o)[G][4]) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, S = v_stride(D);
#pragma unroll
  for (int i = 0; i < G; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  if constexpr (TACHYON_ATTENTION_BF16) {
#pragma unroll
    for (int js = 0; js < kChunkTiles / 2; ++js) {  // 16-key steps: score tiles 2js, 2js + 1
      const uint32_t a[4] = {pack_operands(p[2 * js][0], p[2 * js][1]), pack_operands(p[2 * js][2], p[2 * js][3]),
                             pack_operands(p[2 * js + 1][0], p[2 * js + 1][1]),
                             pack_operands(p[2 * js + 1][2], p[2 * js + 1][3])};
      const float* v = vs + (16 * js + 2 * t) * S + 8 * nt0 + g;
#pragma unroll
      for (int i = 0; i < G; ++i)
        if (nt0 + i < nt_end)
          mma_bf16(o[i], a, pack_operands(v[8 * i], v[8 * i + S]), pack_operands(v[8 * i + 8 * S], v[8 * i + 9 * S]));
    }
  } else {
#pragma unroll
    for (int j = 0; j < kChunkTiles; ++j) {
      const float* v = vs + (8 * j + 2 * t) * S + 8 * nt0 + g;
#pragma unroll
      for (int i = 0; i < G; ++i)
        if (nt0 + i < nt_end)
          mma_tf32(o[i], __float_as_uint(p[j][0]), __float_as_uint(p[j][2]), __float_as_uint(p[j][1]),
                   __float_as_uint(p[j][3]), __float_as_uint(v[8 * i]), __float_as_uint(v[8 * i + S]));
    }
  }
}

// Merging a chunk state (m, l) into the running (M, L): the factors for the old and the new
// accumulators (A = fmaf(a, fn, A · fo)). M = -inf (nothing merged yet) gives fo = 0.
__device__ __forceinline__ void merge_factors(float& M, float& L, float m, float l, float& fo, float& fn) {
  const float mn = fmaxf(M, m);
  fo = exp2f(M - mn);
  fn = exp2f(m - mn);
  L = fmaf(l, fn, L * fo);
  M = mn;
}

// Sinks, then normalisation: out = A · rescale · inv.
__device__ __forceinline__ void finish_factors(float M, float L, const float* sinks, int h, float& rescale,
                                               float& inv) {
  rescale = 1.f;
  if (sinks) {  // a sink is a logit (natural units); M is in base-2 units
    const float sink = sinks[h] * kLog2e, m_f = fmaxf(M, sink);
    rescale = exp2f(M - m_f);
    L = L * rescale + exp2f(sink - m_f);
  }
  inv = 1.f / L;
}
#endif

}  // namespace tachyon::kernels::cuda
