// The arithmetic of attention over one 64-key chunk on tensor cores, shared by the query-tile
// kernel (prefill, chunked prefill) and the split-KV decode kernel (attention.cu), so that a
// row's bits never depend on which kernel ran it.
//
// The canonical reduction of one (row, head): keys are cut into chunks of kChunkKeys aligned to
// absolute positions. For each chunk with at least one valid key:
//   s  = scale · q·k over d, one chain of mma.m16n8k8 (tf32 in, f32 accumulate) over 8-wide d
//        steps in order from zero (k index t of step 2b ↔ d 16b + 4t, t + 4 ↔ 16b + 4t + 1;
//        of step 2b + 1 ↔ 16b + 4t + 2, 16b + 4t + 3); softcapped; -inf where the key is masked;
//   m  = max of s; p = tf32(exp(s - m)) (0 where masked); l = the sum of p in the fixed order
//        of chunk_softmax;
//   o  = p·v, per 8-wide d tile one chain of mma.m16n8k8 over the chunk's 8-key steps in order
//        from zero;
// and the chunk states (m, l, o) are merged in chunk order by merge_factors (the first merge
// into M = -inf, L = 0, A = 0 yields the chunk's own state). Sinks and the normalisation come
// last (finish_factors).
//
// Built with TACHYON_ATTENTION_BF16 (CMake option of that name) the operands are bf16 instead:
// q, k, p and v rounded to bf16 (round to nearest even), s one chain of mma.m16n8k16 (bf16 in,
// f32 accumulate) over 16-wide d steps (k index 2t, 2t + 1 of step b ↔ d 16b + 4t, 16b + 4t + 1;
// 2t + 8, 2t + 9 ↔ 16b + 4t + 2, 16b + 4t + 3; head_dim % 16 == 8 ends with one m16n8k8), o one
// chain per d tile over the chunk's 16-key steps (k index = key - 16·step, so p comes straight
// from the score registers of tiles 2·step and 2·step + 1): half the MMAs of the tf32 chains and
// twice the tensor rate. The values stay f32 in memory (bf16 ones), packed into bf16 pairs as
// the fragments are built. What it costs in accuracy, measured on the CPU oracle with the same
// rounding: bench/precision/attention_operands.cpp.
//
// An MMA output element depends only on its row of A and its column of B, so a row's result
// does not depend on the other rows of its 16-row tile (other heads, other positions, padding).
// The logical k index of a step is permuted so that operands come in wide loads: q and k as
// 16 bytes per lane (see s above), and p straight from the score registers (k index t of a key
// step ↔ key 2t, t + 4 ↔ 2t + 1: the accumulator layout holds columns 2t, 2t + 1), with no
// shuffle.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mma.cuh"

#ifndef TACHYON_ATTENTION_BF16
#define TACHYON_ATTENTION_BF16 0
#endif

namespace tachyon::kernels::cuda {

constexpr int kChunkKeys = 64;
constexpr int kChunkTiles = kChunkKeys / 8;  // 8-key tiles of s per chunk

// Shared-memory row strides (in 4-byte words) for head_dim D (a multiple of 8): q and K are read
// 16 bytes at (row g, word 4t) by lane 4g + t: conflict-free when the stride is 16 mod 32; V is
// read as scalars at (key 2t, column g): conflict-free when the stride is 4 mod 16. Both keep
// rows 16-byte aligned for cp.async.
__host__ __device__ inline int qk_stride(int D) { return D + (48 - D % 32) % 32; }
__host__ __device__ inline int v_stride(int D) { return D + (20 - D % 16) % 16; }

#ifdef __CUDACC__
// tf32 rounding to nearest, ties away from zero (cvt.rna.tf32.f32's rounding), as integer ops:
// half a tf32 ulp added to the magnitude, the low 13 bits cleared (a conversion instruction runs
// at a fraction of the rate: bench/NOTES-cuda.md). Finite inputs only. K and V are stored in the
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

// Raw scores of the warp's 16 pairs against the chunk's 64 keys. qs: the pairs' q as operand
// bits (to_operand; row stride qk_stride; rows at or past `q_rows` are not read: zero); ks: the
// chunk's K rows (operand values, row stride qk_stride). Lane 4g + t gets, for key tile j,
// s[j] = {(g, 8j + 2t), (g, 8j + 2t + 1), (g + 8, 8j + 2t), (g + 8, 8j + 2t + 1)}.
// d is taken 16 at a time: lane t reads d 4t .. 4t + 3 of the block with one 16-byte load and
// feeds the first two to the block's first tf32 MMA, the last two to its second (bf16: all four
// to one MMA; for head_dim % 16 == 8 the last 8 are one MMA of 8-byte loads). DT = head_dim / 8
// when known at compile time (0: read D).
template <int DT>
__device__ __forceinline__ void chunk_scores(const uint32_t* qs, int q_rows, const float* ks, int D,
                                             float (&s)[kChunkTiles][4]) {
  if constexpr (DT > 0) D = 8 * DT;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, S = qk_stride(D);
#pragma unroll
  for (int j = 0; j < kChunkTiles; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
  const bool row_a = g < q_rows, row_b = g + 8 < q_rows;
  const uint32_t* qa_row = qs + g * S;
  const uint32_t* qb_row = qs + (g + 8) * S;
  const float* k_row = ks + g * S;
  const int D16 = D / 16 * 16;
#pragma unroll(DT > 0 ? DT / 2 : 1)
  for (int d0 = 0; d0 < D16; d0 += 16) {
    const uint4 qa = row_a ? *reinterpret_cast<const uint4*>(qa_row + d0 + 4 * t) : make_uint4(0u, 0u, 0u, 0u);
    const uint4 qb = row_b ? *reinterpret_cast<const uint4*>(qb_row + d0 + 4 * t) : make_uint4(0u, 0u, 0u, 0u);
    if constexpr (TACHYON_ATTENTION_BF16) {
      const uint32_t a[4] = {pack_operands(qa.x, qa.y), pack_operands(qb.x, qb.y), pack_operands(qa.z, qa.w),
                             pack_operands(qb.z, qb.w)};
#pragma unroll
      for (int j = 0; j < kChunkTiles; ++j) {
        const uint4 k = *reinterpret_cast<const uint4*>(k_row + 8 * j * S + d0 + 4 * t);
        mma_bf16(s[j], a, pack_operands(k.x, k.y), pack_operands(k.z, k.w));
      }
    } else {
#pragma unroll
      for (int j = 0; j < kChunkTiles; ++j) {
        const uint4 k = *reinterpret_cast<const uint4*>(k_row + 8 * j * S + d0 + 4 * t);
        mma_tf32(s[j], qa.x, qb.x, qa.y, qb.y, k.x, k.y);
        mma_tf32(s[j], qa.z, qb.z, qa.w, qb.w, k.z, k.w);
      }
    }
  }
  if (D16 < D) {
    const uint2 qa = row_a ? *reinterpret_cast<const uint2*>(qa_row + D16 + 2 * t) : make_uint2(0u, 0u);
    const uint2 qb = row_b ? *reinterpret_cast<const uint2*>(qb_row + D16 + 2 * t) : make_uint2(0u, 0u);
#pragma unroll
    for (int j = 0; j < kChunkTiles; ++j) {
      const uint2 k = *reinterpret_cast<const uint2*>(k_row + 8 * j * S + D16 + 2 * t);
      if constexpr (TACHYON_ATTENTION_BF16)
        mma_bf16_k8(s[j], pack_operands(qa.x, qa.y), pack_operands(qb.x, qb.y), pack_operands(k.x, k.y));
      else
        mma_tf32(s[j], qa.x, qb.x, qa.y, qb.y, k.x, k.y);
    }
  }
}

// Scales, softcaps and masks the scores (keys [lo[i], hi[i]] of the chunk are valid for the
// lane's row i: 0 for g, 1 for g + 8; lo > hi: none), then turns them into p in place (operand
// bits as floats) and returns each row's m (-inf: no valid key) and l.
__device__ __forceinline__ void chunk_softmax(float (&s)[kChunkTiles][4], const int (&lo)[2], const int (&hi)[2],
                                              float scale, float softcap, float (&m)[2], float (&l)[2]) {
  const int t = threadIdx.x % 4;
  m[0] = m[1] = -INFINITY;
#pragma unroll
  for (int j = 0; j < kChunkTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = e / 2, key = 8 * j + 2 * t + e % 2;
      float score = -INFINITY;
      if (key >= lo[i] && key <= hi[i]) {
        score = s[j][e] * scale;
        if (softcap > 0.f) score = softcap * tanhf(score / softcap);
      }
      s[j][e] = score;
      m[i] = fmaxf(m[i], score);
    }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    m[i] = fmaxf(m[i], __shfl_xor_sync(0xffffffffu, m[i], 1));
    m[i] = fmaxf(m[i], __shfl_xor_sync(0xffffffffu, m[i], 2));
  }
  l[0] = l[1] = 0.f;
#pragma unroll
  for (int j = 0; j < kChunkTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = e / 2;
      // __expf: one ex2.approx, the same instruction in every kernel; p is rounded to the operand
      // format anyway.
      const float p = s[j][e] == -INFINITY ? 0.f : round_operand(__expf(s[j][e] - m[i]));
      s[j][e] = p;
      l[i] += p;
    }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
  }
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
  fo = expf(M - mn);
  fn = expf(m - mn);
  L = fmaf(l, fn, L * fo);
  M = mn;
}

// Sinks, then normalisation: out = A · rescale · inv.
__device__ __forceinline__ void finish_factors(float M, float L, const float* sinks, int h, float& rescale,
                                               float& inv) {
  rescale = 1.f;
  if (sinks) {
    const float sink = sinks[h], m_f = fmaxf(M, sink);
    rescale = expf(M - m_f);
    L = L * rescale + expf(sink - m_f);
  }
  inv = 1.f / L;
}
#endif

}  // namespace tachyon::kernels::cuda
