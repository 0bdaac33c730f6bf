// What the attention kernels (attention_prefill.cu, attention_decode.cu, attention_kv_write.cu)
// share: tree rows' key positions, the chunk's K and V staging, q in the operand format, and the
// per-head prologue (RMSNorm, RoPE) that the fused prologue kernel and the decode kernel both run,
// so that their bits are the same by construction. Internal to src/kernels/cuda.
#pragma once

#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/attention_chunk.cuh"
#include "kernels/cuda/attention_tile.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kv_codec.cuh"
#include "kernels/cuda/rowwise.cuh"

namespace tachyon::kernels::cuda {

// head_dim: a multiple of 8 (the MMA's k step) up to 256.
inline void check_head_dim(int D) {
  if (D % 8 != 0 || D > 256) fail_unsupported("attention head_dim (a multiple of 8, at most 256)", D);
}

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
// copy they were a chain of dependent loads, docs/perf/cuda.md), then shared
// through `chunk_slot_s` behind a CTA barrier: every thread of the CTA calls this.
// (The decode kernel calls the two halves itself: every slot before its programmatic wait, the
// rows in two groups around it.)
// An f32 cache's keys are element offsets (slot · width + the head's offset, as cp.async copies
// them); a coded cache's are record keys (kv_codec.cuh kv_record_key), whose rows
// copy_chunk_rows dequantizes in registers.
__shared__ int64_t chunk_slot_s[kChunkKeys];  // -1: a zero row
template <typename KeyPosition>
__device__ __forceinline__ void lookup_chunk_slots(const KvPair& kv, const int32_t* table, int block_size, int kvh,
                                                   int D, int c0, int k_begin, int k_end, KeyPosition key_position) {
  const bool f32 = kv.f32();
  const int64_t width = static_cast<int64_t>(kv.heads) * D, head_offset = static_cast<int64_t>(kvh) * D;
  for (int jj = threadIdx.x; jj < kChunkKeys; jj += blockDim.x) {
    const int j = c0 + jj;
    int64_t key = -1;
    if (j >= k_begin && j <= k_end) {
      const int64_t slot = kv_slot(table, key_position(j), block_size);
      key = f32 ? slot * width + head_offset : kv_record_key(slot, block_size, kv.heads, kvh);
    }
    chunk_slot_s[jj] = key;
  }
  __syncthreads();
}
// Eight values rounded to the operand format, to dst (16-byte aligned).
__device__ __forceinline__ void store_operands8(const float (&x)[8], float* dst) {
  *reinterpret_cast<float4*>(dst) =
      make_float4(round_operand(x[0]), round_operand(x[1]), round_operand(x[2]), round_operand(x[3]));
  *reinterpret_cast<float4*>(dst + 4) =
      make_float4(round_operand(x[4]), round_operand(x[5]), round_operand(x[6]), round_operand(x[7]));
}
// Elements [e0, e0 + 8) of a coded record's K and V (record key `key`; -1: zeros), dequantized
// (kv_codec.cuh dequant8) and rounded to the operand format, to kd and vd (16-byte aligned).
template <KvCodec KC, KvCodec VC>
__device__ __forceinline__ void stage_record8(const KvPair& kv, int64_t key, int e0, float* kd, float* vd) {
  float k[8], v[8];
  if (key < 0) {
#pragma unroll
    for (int e = 0; e < 8; ++e) k[e] = v[e] = 0.f;
  } else {
    dequant8<KC>(kv.k, key, e0, k);
    dequant8<VC>(kv.v, key, e0, v);
  }
  store_operands8(k, kd);
  store_operands8(v, vd);
}
// Calls f with the format's (K codec, V codec) as template arguments; coded formats only (f32
// is staged by cp.async: no instantiation for it, whose registers would count in every kernel).
template <typename F>
__device__ __forceinline__ void with_codecs(KvFormat format, F f) {
  using C = KvCodec;
  switch (format) {
    case KvFormat::F32: return;
    case KvFormat::BF16: return f(std::integral_constant<C, C::BF16>{}, std::integral_constant<C, C::BF16>{});
    case KvFormat::F16: return f(std::integral_constant<C, C::F16>{}, std::integral_constant<C, C::F16>{});
    case KvFormat::FP8: return f(std::integral_constant<C, C::FP8>{}, std::integral_constant<C, C::FP8>{});
    case KvFormat::Int8: return f(std::integral_constant<C, C::U8Affine>{}, std::integral_constant<C, C::U8Affine>{});
    case KvFormat::Int4: return f(std::integral_constant<C, C::U4Affine>{}, std::integral_constant<C, C::U4Affine>{});
    case KvFormat::Turbo:
      return f(std::integral_constant<C, C::TurboK8>{}, std::integral_constant<C, C::LloydMaxV4>{});
  }
}
// One record's elements [e0, e0 + 8) as copy_chunk_rows stages them (the decode prologue's new key).
__device__ __forceinline__ void load_head_record8(const KvPair& kv, int64_t key, int e0, float* kd, float* vd) {
  with_codecs(kv.format(), [&](auto kc, auto vc) { stage_record8<decltype(kc)::value, decltype(vc)::value>(kv, key, e0, kd, vd); });
}
// Rows [jj_begin, jj_end) of a coded cache's chunk, eight elements per thread and step, in
// batches of kStageBatch steps: every load of a batch issued (load_unit) before the first is
// decoded (a load waited for per step was a chain of memory round trips), then the values
// dequantized in registers and stored as stage_record8 stores them.
// The decode kernel stages with every load of its thread in one batch (8: the loads of a 64-key
// chunk at head_dim 128 over 128 threads); the query-tile kernel, whose accumulators are live
// while it stages the next chunk, with 2 (8 spilled its head_dim 128 and 256 variants).
constexpr int kStageBatch = 8, kTileStageBatch = 2;
// Which rows of the chunk a staging call copies: K and V, or one of them (the K-and-V-apart
// variant, attention.cuh: K before the scores, V after them, into the same buffer).
enum class ChunkRows { KV, K, V };
template <KvCodec KC, KvCodec VC, int kBatch, ChunkRows kRows = ChunkRows::KV>
__device__ __forceinline__ void copy_coded_rows(const KvPair& kv, int D, int c0, int jj_begin, int jj_end,
                                                int skip_lo, int skip_hi, float* ks, float* vs) {
  const int units = D / 8, KS = qk_stride(D), VS = v_stride(D), end = jj_end * units;
  for (int base = jj_begin * units + threadIdx.x; base < end; base += kBatch * blockDim.x) {
    RawUnit rk[kBatch], rv[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int i = base + b * blockDim.x, jj = i / units, e0 = 8 * (i % units);
      const int64_t key = i < end ? chunk_slot_s[jj] : -1;
      if (key >= 0 && !(c0 + jj >= skip_lo && c0 + jj <= skip_hi)) {
        if constexpr (kRows != ChunkRows::V) rk[b] = load_unit<KC>(kv.k, key, e0);
        if constexpr (kRows != ChunkRows::K) rv[b] = load_unit<VC>(kv.v, key, e0);
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int i = base + b * blockDim.x, jj = i / units, e0 = 8 * (i % units);
      if (i >= end || (c0 + jj >= skip_lo && c0 + jj <= skip_hi)) continue;
      float k[8], v[8];
      if (chunk_slot_s[jj] < 0) {
#pragma unroll
        for (int e = 0; e < 8; ++e) k[e] = v[e] = 0.f;
      } else {
        if constexpr (kRows != ChunkRows::V) decode_unit<KC>(rk[b], k);
        if constexpr (kRows != ChunkRows::K) decode_unit<VC>(rv[b], v);
      }
      if constexpr (kRows != ChunkRows::V) store_operands8(k, ks + jj * KS + e0);
      if constexpr (kRows != ChunkRows::K) store_operands8(v, vs + jj * VS + e0);
    }
  }
}
// Rows [jj_begin, jj_end) of the chunk but the keys in [skip_lo, skip_hi]: copies of the looked-up
// slots, zeros for the rest; no commit. f32: cp.async (the rows land at the next cp_async_wait);
// the other formats: loads, dequantized in registers, stored. kRows: K and V, or one of them (the
// other's pointer is not used).
template <int kBatch = kStageBatch, ChunkRows kRows = ChunkRows::KV>
__device__ __forceinline__ void copy_chunk_rows(const KvPair& kv, int D, int c0, int jj_begin, int jj_end,
                                                int skip_lo, int skip_hi, float* ks, float* vs) {
  if (!kv.f32())
    return with_codecs(kv.format(), [&](auto kc, auto vc) {
      copy_coded_rows<decltype(kc)::value, decltype(vc)::value, kBatch, kRows>(kv, D, c0, jj_begin, jj_end,
                                                                                skip_lo, skip_hi, ks, vs);
    });
  const float* __restrict__ k_cache = reinterpret_cast<const float*>(kv.k.base);
  const float* __restrict__ v_cache = reinterpret_cast<const float*>(kv.v.base);
  const int vecs = D / 4, KS = qk_stride(D), VS = v_stride(D);
  for (int i = jj_begin * vecs + threadIdx.x; i < jj_end * vecs; i += blockDim.x) {
    const int jj = i / vecs, c = i % vecs;
    if (c0 + jj >= skip_lo && c0 + jj <= skip_hi) continue;
    float* kd = ks + jj * KS + 4 * c;
    float* vd = vs + jj * VS + 4 * c;
    const int64_t slot = chunk_slot_s[jj];
    if (slot < 0) {
      if constexpr (kRows != ChunkRows::V) *reinterpret_cast<float4*>(kd) = make_float4(0.f, 0.f, 0.f, 0.f);
      if constexpr (kRows != ChunkRows::K) *reinterpret_cast<float4*>(vd) = make_float4(0.f, 0.f, 0.f, 0.f);
      continue;
    }
    if constexpr (kRows != ChunkRows::V) cp_async16(kd, k_cache + slot + 4 * c);
    if constexpr (kRows != ChunkRows::K) cp_async16(vd, v_cache + slot + 4 * c);
  }
}
// The query-tile kernel's staging of a chunk (K and V, or K alone: its V follows by copy_chunk_rows
// of ChunkRows::V, over the slots looked up here).
template <ChunkRows kRows = ChunkRows::KV, typename KeyPosition>
__device__ __forceinline__ void stage_chunk(const KvPair& kv, const int32_t* table, int block_size, int kvh, int D,
                                            int c0, int k_begin, int k_end, KeyPosition key_position, float* ks,
                                            float* vs) {
  lookup_chunk_slots(kv, table, block_size, kvh, D, c0, k_begin, k_end, key_position);
  copy_chunk_rows<kTileStageBatch, kRows>(kv, D, c0, 0, kChunkKeys, 1, 0, ks, vs);
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
}  // namespace

}  // namespace tachyon::kernels::cuda
