// The ring kernel's operands in a TACHYON_ATTENTION_BF16 build (attention_wgmma.cu): bf16 q, K and
// V in shared memory, wgmma.m64nNk16 in place of the tf32 m64nNk8 chains. What changes against
// the tf32 layout (attention_wgmma_layout.cuh):
//  - every operand row is 16 bytes of 8 bf16 in natural d order (attention_chunk.cuh's bf16 k
//    order: step b's k index i is d 16b + i), so q and K are the tf32 core-matrix layouts at half
//    the bytes;
//  - V needs no transposition: 16-bit wgmma reads B N-major (imm-trans-b 1), so a core matrix is
//    8 keys x 8 d, each key's 16 bytes as the cache holds them, key blocks kVKeyBytes apart (the
//    leading byte offset) and d blocks 128 bytes apart (the stride byte offset);
//  - the producer converts: the cache holds f32 values that are bf16 already (write_kv rounds to
//    the operand format), so a bf16 pair is the two values' high halves.
// Bits: the chains are attention_chunk.cuh's bf16 chains (scores one chain over the 16-wide d
// steps, p·v one chain over the 16-key steps, p from the score registers of two key tiles), which
// the mma.sync kernels compute; wgmma.m64nNk16 gives mma.m16n8k16's bits for the same k order
// (as found for the matmul).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/attention_chunk.cuh"
#include "kernels/cuda/attention_wgmma_layout.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace tachyon::kernels::cuda {

// Shared memory of the bf16 ring, in bytes, head_dim D (64 or 128):
//  q    [D/8 column blocks][16 pair blocks][8 pairs][16 B]: lbo kQColBytes, sbo 128 B.
//  K    per slot [D/8 column blocks][8 key blocks][8 keys][16 B]: lbo kKColBytes, sbo 128 B.
//  V    per slot [8 key blocks][D/8 d blocks][8 keys][16 B]: lbo kVKeyBytes, sbo 128 B (N-major).
template <int D>
struct WgmmaBf16Layout {
  static constexpr int kQColBytes = kWgmmaPairs / 8 * 128;
  static constexpr int kKColBytes = kChunkKeys / 8 * 128;
  static constexpr int kVKeyBytes = D / 8 * 128;
  static constexpr int q_bytes = D / 8 * kQColBytes;
  static constexpr int k_bytes = D / 8 * kKColBytes;
  static constexpr int slot_bytes = k_bytes + kChunkKeys / 8 * kVKeyBytes;
  // Four slots: the producer may run three chunks ahead (the tf32 ring fits two).
  static constexpr int ring_slots = 4;
  static constexpr size_t ring_bytes =
      static_cast<size_t>(q_bytes + ring_slots * slot_bytes) + 2 * ring_slots * sizeof(uint64_t);
};

#if defined(__CUDACC__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Four bf16 values held as f32 bits (low halves zero) as 8 bytes of a row.
__device__ __forceinline__ uint2 pack_operand_quad(const float4& v) {
  return make_uint2(pack_operands(v.x, v.y), pack_operands(v.z, v.w));
}

// q of the CTA's 128 pairs into its layout, by the 256 consumer threads (ct: 0 .. 255): thread ct
// takes pair ct % 128 in column blocks ct / 128 + 2i; rounded to the operand format (to_operand),
// as the tf32 staging does; pairs past num_pairs are zeros. pair_q(p): the pair's q row.
template <int D, typename PairQ>
__device__ __forceinline__ void stage_q_bf16(uint8_t* qs, int ct, int num_pairs, PairQ pair_q) {
  using L = WgmmaBf16Layout<D>;
  constexpr int kUnits = D / 16;
  const int p = ct % kWgmmaPairs;
  const float* row = pair_q(min(p, num_pairs - 1));
  float4 x[2 * kUnits];  // every load in flight before the first store
#pragma unroll
  for (int i = 0; i < kUnits; ++i) {
    const int cb = ct / kWgmmaPairs + 2 * i;
    x[2 * i] = *reinterpret_cast<const float4*>(row + 8 * cb);
    x[2 * i + 1] = *reinterpret_cast<const float4*>(row + 8 * cb + 4);
  }
#pragma unroll
  for (int i = 0; i < kUnits; ++i) {
    const int cb = ct / kWgmmaPairs + 2 * i;
    const float4 lo = x[2 * i], hi = x[2 * i + 1];
    const uint4 packed =
        p < num_pairs ? make_uint4(pack_operands(to_operand(lo.x), to_operand(lo.y)),
                                   pack_operands(to_operand(lo.z), to_operand(lo.w)),
                                   pack_operands(to_operand(hi.x), to_operand(hi.y)),
                                   pack_operands(to_operand(hi.z), to_operand(hi.w)))
                      : make_uint4(0u, 0u, 0u, 0u);
    *reinterpret_cast<uint4*>(qs + cb * L::kQColBytes + p / 8 * 128 + p % 8 * 16) = packed;
  }
}

// The producer's part of one chunk: thread t (0 .. 127) takes key t / 2 of the chunk and the
// half t % 2 of every 8-d block (16 bytes of f32: a warp's load instruction reads 16 keys' full
// 32-byte sectors), stores it as 8 bytes of its 16-byte row (a warp's store, 16 keys x 16 bytes,
// takes the two wavefronts its 256 bytes need). V's loads are issued before the slot is free
// (wait_free: the producer's wait on `empty`), K's after V is stored. key_slot: the key's cache
// slot, -1 for a zero row.
template <int D, typename WaitFree>
__device__ __forceinline__ void produce_chunk_bf16(uint8_t* slot, int tid, int64_t key_slot, int64_t width,
                                                   int64_t head_offset, const float* __restrict__ k_cache,
                                                   const float* __restrict__ v_cache, WaitFree wait_free) {
  using L = WgmmaBf16Layout<D>;
  constexpr int kBlocks = D / 8;
  const int key = tid / 2, half = tid % 2;
  const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
  const float* v_row = v_cache + key_slot * width + head_offset + 4 * half;
  const float* k_row = k_cache + key_slot * width + head_offset + 4 * half;
  float4 x[kBlocks];
#pragma unroll
  for (int cb = 0; cb < kBlocks; ++cb)
    x[cb] = key_slot < 0 ? zero : __ldcg(reinterpret_cast<const float4*>(v_row + 8 * cb));
  wait_free();
  uint8_t* vd = slot + L::k_bytes;
#pragma unroll
  for (int cb = 0; cb < kBlocks; ++cb)
    *reinterpret_cast<uint2*>(vd + key / 8 * L::kVKeyBytes + cb * 128 + key % 8 * 16 + half * 8) =
        pack_operand_quad(x[cb]);
#pragma unroll
  for (int cb = 0; cb < kBlocks; ++cb)
    x[cb] = key_slot < 0 ? zero : __ldcg(reinterpret_cast<const float4*>(k_row + 8 * cb));
#pragma unroll
  for (int cb = 0; cb < kBlocks; ++cb)
    *reinterpret_cast<uint2*>(slot + cb * L::kKColBytes + key / 8 * 128 + key % 8 * 16 + half * 8) =
        pack_operand_quad(x[cb]);
}

// Scores: sc = q·K^T as D/16 wgmma.m64n64k16 (q and K from shared memory), the chain started by
// scale-d 0, issued and committed, not waited for. qa: the warpgroup's first pair block.
template <int D>
__device__ __forceinline__ void issue_chunk_scores_bf16(float (&sc)[kChunkTiles][4], const uint8_t* qa,
                                                        const uint8_t* ks) {
  using L = WgmmaBf16Layout<D>;
  float(&flat)[4 * kChunkTiles] = reinterpret_cast<float(&)[4 * kChunkTiles]>(sc);
  const uint64_t qd = core_descriptor(qa, L::kQColBytes, 128), kd = core_descriptor(ks, L::kKColBytes, 128);
  wgmma_fence();
#pragma unroll
  for (int b = 0; b < D / 16; ++b)
    wgmma_m64n64k16_bf16(flat, advance_descriptor(qd, 2 * b * L::kQColBytes),
                         advance_descriptor(kd, 2 * b * L::kKColBytes), b > 0);
  wgmma_commit();
}

// p of a chunk as the p·v wgmmas' A fragments: key tiles 2js, 2js + 1 (chunk_pv's bf16 fragment).
// Packed before the fence of issue_packed_pv_bf16: registers written between the fence and a wgmma
// that reads them make ptxas insert a warpgroup.arrive before it (C7519).
__device__ __forceinline__ void pack_chunk_p(const float (&sc)[kChunkTiles][4], uint32_t (&a)[kChunkTiles / 2][4]) {
#pragma unroll
  for (int js = 0; js < kChunkTiles / 2; ++js) {
    a[js][0] = pack_operands(sc[2 * js][0], sc[2 * js][1]);
    a[js][1] = pack_operands(sc[2 * js][2], sc[2 * js][3]);
    a[js][2] = pack_operands(sc[2 * js + 1][0], sc[2 * js + 1][1]);
    a[js][3] = pack_operands(sc[2 * js + 1][2], sc[2 * js + 1][3]);
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(a[js][i]));  // keeps the packing above the fence
  }
}

// o = p·v as 4 wgmma.m64nDk16, p packed (pack_chunk_p), V N-major from shared memory; issued and
// committed, not waited for.
template <int D>
__device__ __forceinline__ void issue_packed_pv_bf16(float (&o)[D / 2], uint32_t (&a)[kChunkTiles / 2][4],
                                                     const uint8_t* vs) {
  using L = WgmmaBf16Layout<D>;
  const uint64_t vd = core_descriptor(vs, L::kVKeyBytes, 128);
  wgmma_fence();
#pragma unroll
  for (int js = 0; js < kChunkTiles / 2; ++js) {
    const uint64_t b = advance_descriptor(vd, 2 * js * L::kVKeyBytes);
    if constexpr (D == 128) wgmma_m64n128k16_bf16_nb(o, a[js], b, js > 0);
    else wgmma_m64n64k16_bf16_nb(o, a[js], b, js > 0);
  }
  wgmma_commit();
}

// o = p·v with p from the score registers (pack_chunk_p, then issue_packed_pv_bf16).
template <int D>
__device__ __forceinline__ void issue_chunk_pv_bf16(float (&o)[D / 2], const float (&sc)[kChunkTiles][4],
                                                    const uint8_t* vs) {
  uint32_t a[kChunkTiles / 2][4];
  pack_chunk_p(sc, a);
  issue_packed_pv_bf16<D>(o, a, vs);
}
#endif

}  // namespace tachyon::kernels::cuda
