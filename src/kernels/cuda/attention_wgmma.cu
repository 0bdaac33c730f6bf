// The wgmma query-tile attention kernel, warp-specialized (FlashAttention-3's schedule): a
// producer warpgroup fills a ring of (K, V^T) chunks (two slots; four in a bf16 build) on
// mbarriers while two consumer warpgroups run the arithmetic of attention_chunk.cuh on them, so
// the consumers never copy, transpose or meet at a CTA barrier per chunk (the CTA-wide pipeline
// it replaced, where they did, is in git). The consumers compute the same wgmma chains in the
// same k order, chunk_softmax, merge_factors, zero rows outside [kmin, kmax], write_tile_rows:
// the bits of the mma.sync kernel (attention_prefill.cu; attention_wgmma.cuh). A TACHYON_ATTENTION_BF16 build runs the
// same protocol on bf16 operands (attention_ring_bf16.cuh), with the bits of that build's mma.sync
// kernels, and its consumers take the chunks in pairs (kPairs, below).
#include "kernels/cuda/attention_wgmma.cuh"

#include <climits>
#include <cmath>
#include <type_traits>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/attention_chunk.cuh"
#include "kernels/cuda/attention_ring_bf16.cuh"
#include "kernels/cuda/attention_tile.cuh"
#include "kernels/cuda/attention_wgmma_layout.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kv_codec.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace tachyon::kernels::cuda {
namespace {

constexpr int kRingThreads = 384;  // warpgroup 0 produces; 1 and 2 consume, 64 pairs each
// Launch bounds (384, 1) give every thread 168 registers at launch (65536 / 384, rounded down to
// a multiple of 8): a pool of 168 x 384. The producer gives part of its share back and the
// consumers take it. ptxas (CUDA 13.0, head_dim 128), each side compiled alone under its count:
// the consumers spill at 176, not at 184 (the CTA-wide pipeline's warpgroups, which also staged, used
// 211); the producer, which keeps 16 V loads (64 registers) in flight, needs 104. The whole
// kernel spills 64 bytes at 104 / 200 and nothing at 120 / 192 or 136 / 184 (both fill the pool).
// A TACHYON_ATTENTION_BF16 build's producer holds 16 loads of 16 bytes (produce_chunk_bf16) and
// fits 104; its consumers' pairs of chunks (two chunks' scores, then two packed p beside o and A)
// spill 16-28 bytes at 192 and nothing at 200 (ptxas, CUDA 13.0, head_dim 128).
constexpr uint32_t kLaunchRegs = 168, kProducerRegs = TACHYON_ATTENTION_BF16 ? 104 : 120,
                   kConsumerRegs = TACHYON_ATTENTION_BF16 ? 200 : 192;
static_assert(kProducerRegs * 128 + kConsumerRegs * 256 <= kLaunchRegs * kRingThreads);
// A TACHYON_ATTENTION_BF16 build's consumers take the chunks in pairs (the tf32 operands'
// registers leave no room for two chunks' scores); bench/cuda/lab/attention-bf16-one-chunk.patch
// takes them one at a time, the comparison that build still waits for.
constexpr bool kRingPairs = TACHYON_ATTENTION_BF16;

enum RingCode : int { kRingF32 = 0, kRingBf16 = 1, kRingF16 = 2 };
// Four 16-bit cache elements (two words, element 2i in the low half of word i) as operand values.
template <int kCode>
__device__ __forceinline__ float4 ring16_to_operands(uint2 w) {
  float x[4];
  const uint32_t words[2] = {w.x, w.y};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if constexpr (kCode == kRingBf16) {
      x[2 * i] = bf16_bits_to_f32(words[i] & 0xffffu);
      x[2 * i + 1] = bf16_bits_to_f32(words[i] >> 16);
    } else {
      x[2 * i] = f16_bits_to_f32(words[i] & 0xffffu);
      x[2 * i + 1] = f16_bits_to_f32(words[i] >> 16);
    }
  }
  return make_float4(round_operand(x[0]), round_operand(x[1]), round_operand(x[2]), round_operand(x[3]));
}

// CTA (query tile, KV head, head chunk) as the mma.sync query-tile kernel, 128 pairs: consumer warpgroup
// cw (warpgroup cw + 1) takes pairs [64 cw, 64 cw + 64), its warp i the 16 pairs from 64 cw + 16 i.
// Chunk n (keys [c_first + 64 n, c_first + 64 n + 64), up to kmax) goes to slot n % 2.
//
// Ring protocol and why it holds:
//  - full[slot] (128 arrivals: every producer thread, once per chunk) completes when the chunk's K
//    (cp.async, zero rows stored directly) and V^T (stores) have all landed. Each producer thread
//    waits for its own cp.asyncs (cp.async.wait_group), then fence.proxy.async (its cp.async and
//    st.shared bytes, generic proxy, are read by wgmma, the async proxy), then arrives (release);
//    the consumers' wait on full is the acquire. This is the CTA-wide pipeline's
//    wait-fence-barrier with an mbarrier in place of __syncthreads.
//  - empty[slot] (8 arrivals: lane 0 of each consumer warp, once per chunk) completes when every
//    consumer warp is done reading the slot: a warp arrives after the wgmma_wait<0> that retires
//    its p·v (its scores were retired before the softmax), so its K and V^T are no longer read.
//  - Phases: chunk n is phase n / 2 of its slot's barriers; waits are on its parity. A consumer
//    waits on full[n % 2] for chunk n before it arrives on empty[n % 2] for it, even where its
//    warpgroup has no valid key in the chunk (`live` false): its arrival then cannot fall into
//    the phase of chunk n - 2 (full of chunk n completes only after the producer saw empty of
//    chunk n - 2 complete), and every warp arrives once per chunk, so the producer never waits
//    forever. The producer fills chunk n >= 2 only after empty of chunk n - 2: it runs at most two
//    chunks ahead of the slowest consumer warp. Neither barrier can be two phases ahead of a
//    waiter: full of chunk n + 2 needs empty of chunk n, which needs the waiting consumer's own
//    arrival for chunk n (after its wait); empty of chunk n needs full of chunk n, which needs
//    the waiting producer's own arrival (after its wait for empty of chunk n - 2). And a phase
//    older than the awaited one is complete: the producer waited for it when it filled chunk
//    n - 2.
//  - Every producer thread runs every chunk to the end (no early exit before its last arrival)
//    and leaves no cp.async in flight; the consumers use no CTA barrier after the roles split, so
//    the producer warps may exit first.
//  - Ping-pong: named barriers 1 and 2 (256 threads: one warpgroup's bar.sync, the
//    other's bar.arrive) make the two consumer warpgroups issue their wgmma chains in turns,
//    scores 0, scores 1, p·v 0, p·v 1, ..., so that one's softmax overlaps the other's wgmmas.
//    Both warpgroups take both turns of every chunk, `live` or not (the same chunks, so the same
//    number of turns); warpgroup 1 arrives once ahead (before its first chunk) and not after its
//    last turn, so each barrier gets exactly as many arrivals as syncs, never a second arrival
//    into a phase (between two arrivals of one warpgroup lies its sync on the other barrier,
//    which needs the other warpgroup's sync on this one first).
//  - pdl_enter() first: q, the metadata and the cache are read only after it.
// kCode: how the cache stores its elements (kRingF32, kRingBf16, kRingF16; ring16_to_operands):
// f32 rows are copied as they are, 16-bit rows loaded and widened by the producer (exact: every
// bf16 and f16 value is a tf32 one), the same values the mma.sync kernel stages.
template <int D, bool kPairs, int kCode>
__global__ void __launch_bounds__(kRingThreads, 1) attention_ring_kernel(
    const float* __restrict__ q, DeviceAttentionMeta meta, const QueryTile* __restrict__ tiles,
    const void* __restrict__ k_base, const void* __restrict__ v_base, AttentionShape s, int heads_per_chunk,
    float* __restrict__ out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const float* __restrict__ k_cache = static_cast<const float*>(k_base);
  const float* __restrict__ v_cache = static_cast<const float*>(v_base);
  const uint16_t* __restrict__ k16 = static_cast<const uint16_t*>(k_base);
  const uint16_t* __restrict__ v16 = static_cast<const uint16_t*>(v_base);
  using L = WgmmaLayout<D>;
  using LB = WgmmaBf16Layout<D>;  // TACHYON_ATTENTION_BF16 builds (attention_ring_bf16.cuh)
  constexpr bool kBf16 = TACHYON_ATTENTION_BF16;
  constexpr int DT = D / 8;  // 8-column d tiles
  constexpr int kSlots = kBf16 ? LB::ring_slots : L::ring_slots, kConsumerWarps = 8;
  constexpr int kQBytes = kBf16 ? LB::q_bytes : L::q_words * 4, kSlotBytes = kBf16 ? LB::slot_bytes : L::slot_words * 4;
  pdl_enter();
  extern __shared__ __align__(128) float4 smem4[];
  uint8_t* base = reinterpret_cast<uint8_t*>(smem4);
  uint32_t* qs = reinterpret_cast<uint32_t*>(base);
  float* ring = reinterpret_cast<float*>(base + kQBytes);  // [kSlots][K: k_words, V^T: vt_words]
  const auto slot_at = [&](int slot) { return base + kQBytes + slot * kSlotBytes; };  // the bf16 build's K, V
  uint64_t* full = reinterpret_cast<uint64_t*>(base + kQBytes + kSlots * kSlotBytes);  // [kSlots]
  uint64_t* empty = full + kSlots;                                                     // [kSlots]
  __shared__ int32_t pos_s[kWgmmaPairs], lo_s[kWgmmaPairs];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // The warpgroup index through a shuffle: provably uniform per warp, so ptxas does not treat
  // the wgmmas as divergent code (as the CTA-wide pipeline did).
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);
  if (tid == 0) {
    for (int i = 0; i < kSlots; ++i) mbar_init(&full[i], 128), mbar_init(&empty[i], kConsumerWarps);
    fence_mbarrier_init();
  }
  const TilePairs tp = tile_pairs_of_cta(tiles, s, heads_per_chunk);
  const int kvh = tp.kvh, hg = tp.hg, h_begin = tp.h_begin, num_pairs = tp.num_pairs;
  const QueryTile tile = tp.tile;
  if (kBf16 && wg > 0) {
    stage_q_bf16<D>(base, tid - 128, num_pairs, [&](int p) {
      return q + (static_cast<int64_t>(tile.row0 + p / hg) * s.num_heads + h_begin + p % hg) * D;
    });
    fence_proxy_async();  // q (stores) is read by wgmma after the CTA barrier below
  } else if (wg > 0) {
    // q in core-matrix order by the consumers, as the CTA-wide pipeline's 256 threads did it.
    constexpr int kQUnits = kWgmmaPairs * D / 4 / 256, kPairStep = 256 / (D / 4);
    const int ct = tid - 128, c = ct / 8 % (D / 4), p0 = ct % 8 + 8 * (ct / (2 * D));
    float4 v[kQUnits];
#pragma unroll
    for (int n = 0; n < kQUnits; ++n) {
      const int p = p0 + kPairStep * n;
      const int64_t pair_q = (static_cast<int64_t>(tile.row0 + p / hg) * s.num_heads + h_begin + p % hg) * D;
      v[n] = p < num_pairs ? *reinterpret_cast<const float4*>(q + pair_q + 4 * c) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int n = 0; n < kQUnits; ++n) {
      const int p = p0 + kPairStep * n;
      *reinterpret_cast<uint4*>(qs + c * L::kQL + p / 8 * 32 + p % 8 * 4) =
          make_uint4(to_operand(v[n].x), to_operand(v[n].y), to_operand(v[n].z), to_operand(v[n].w));
    }
    fence_proxy_async();  // q (stores) is read by wgmma after the CTA barrier below
  }
  int kmin, kmax;
  // Its CTA barrier (the last one of the kernel) also publishes the mbarriers' initialisation and q.
  tile_key_windows(meta, s, tile, pos_s, lo_s, kmin, kmax);
  const int c_first = kmin / kChunkKeys * kChunkKeys;

  if (wg == 0) {
    // The producer. Thread (warp w, lane) handles keys 8 kb + l (kb < 8) of each chunk, l = lane / 2
    // % 8, in column blocks c = 4 (w + 4 h) + 2 (lane / 16) + lane % 2 (h < D / 64): a warp covers
    // 8 keys x 4 column blocks per unit, the lanes of the CTA-wide pipeline's copies (8 distinct
    // 16-byte slots per cp.async wavefront) and, for V^T, 32 distinct banks per store (keys
    // e + 2u: 4e + u, column blocks: 0, 16, 8, 24). A TACHYON_ATTENTION_BF16 build converts instead
    // (produce_chunk_bf16: two threads per key, no transposition, four slots).
    setmaxnreg_dec<kProducerRegs>();
    constexpr int kRounds = D / 64;
    const int32_t* table = meta.block_tables + meta.block_table_offsets[meta.row_seq[tile.row0]];
    const int64_t width = static_cast<int64_t>(s.num_kv_heads) * D, head_offset = static_cast<int64_t>(kvh) * D;
    const int l = lane / 2 % 8;
    auto column = [&](int h) { return 4 * (warp + 4 * h) + 2 * (lane / 16) + lane % 2; };
    if constexpr (kBf16) {
      static_assert(kCode == kRingF32, "a TACHYON_ATTENTION_BF16 build's ring reads f32 caches only");
      for (int c0 = c_first, n = 0; c0 <= kmax; c0 += kChunkKeys, ++n) {
        const int slot = n % kSlots, j = c0 + tid / 2;
        const int64_t key_slot = j < kmin || j > kmax ? -1 : kv_slot(table, j, s.block_size);
        produce_chunk_bf16<D>(slot_at(slot), tid, key_slot, width, head_offset, k_cache, v_cache,
                              [&] {
                                if (n >= kSlots) mbar_wait(&empty[slot], (n / kSlots - 1) & 1);  // chunk n - kSlots
                              });
        fence_proxy_async();  // this thread's K and V stores, read by wgmma
        mbar_arrive(&full[slot]);
      }
    } else {
      for (int c0 = c_first, n = 0; c0 <= kmax; c0 += kChunkKeys, ++n) {
        const int slot = n % kSlots;
        // The keys' cache slots first (independent table loads, issued together); -1: outside
        // [kmin, kmax], a zero row (its zero weights multiply finite values). A cache holds fewer
        // than 2^31 slots.
        int32_t key_slot[8];
#pragma unroll
        for (int kb = 0; kb < 8; ++kb) {
          const int j = c0 + 8 * kb + l;
          key_slot[kb] = j < kmin || j > kmax ? -1 : static_cast<int32_t>(kv_slot(table, j, s.block_size));
        }
        // V into registers (its slot need not be free yet: the loads overlap the wait), every
        // row's 16 bytes of both column rounds in flight together.
        // A 16-bit cache: K's 8 bytes too (no cp.async widens), both held raw until the stores.
        float4 v[kRounds][8];
        uint2 kr[kRounds][8], vr[kRounds][8];
#pragma unroll
        for (int h = 0; h < kRounds; ++h)
#pragma unroll
          for (int kb = 0; kb < 8; ++kb) {
            const int64_t e = key_slot[kb] * width + head_offset + 4 * column(h);
            if constexpr (kCode == kRingF32) {
              v[h][kb] = key_slot[kb] < 0 ? make_float4(0.f, 0.f, 0.f, 0.f)
                                          : __ldcg(reinterpret_cast<const float4*>(v_cache + e));
            } else {
              const uint2 zero = make_uint2(0u, 0u);
              vr[h][kb] = key_slot[kb] < 0 ? zero : __ldcg(reinterpret_cast<const uint2*>(v16 + e));
              kr[h][kb] = key_slot[kb] < 0 ? zero : __ldcg(reinterpret_cast<const uint2*>(k16 + e));
            }
          }
        if (n >= kSlots) mbar_wait(&empty[slot], (n / kSlots - 1) & 1);  // chunk n - 2 consumed
        float* kd = ring + slot * L::slot_words;
        float* vd = kd + L::k_words;
#pragma unroll
        for (int h = 0; h < kRounds; ++h)
#pragma unroll
          for (int kb = 0; kb < 8; ++kb) {
            float* dst = kd + column(h) * L::kKL + kb * 32 + l * 4;
            if constexpr (kCode != kRingF32)
              *reinterpret_cast<float4*>(dst) = ring16_to_operands<kCode>(kr[h][kb]);  // zero rows: zero codes
            else if (key_slot[kb] < 0) *reinterpret_cast<float4*>(dst) = make_float4(0.f, 0.f, 0.f, 0.f);
            else cp_async16(dst, k_cache + key_slot[kb] * width + head_offset + 4 * column(h));
          }
        cp_async_commit();
        // V^T: the stores of the CTA-wide pipeline's transpose_v, the same vt.
#pragma unroll
        for (int h = 0; h < kRounds; ++h)
#pragma unroll
          for (int kb = 0; kb < 8; ++kb) {
            const int c = column(h);
            float* dst = vd + (2 * kb + l % 2) * L::kVL + c / 2 * L::kVS + c % 2 * 16 + l / 2;
            float4 x;  // a 16-bit cache's V widened here: raw, it held half the registers over the wait
            if constexpr (kCode == kRingF32) x = v[h][kb];
            else x = ring16_to_operands<kCode>(vr[h][kb]);
            dst[0] = x.x, dst[4] = x.y, dst[8] = x.z, dst[12] = x.w;
          }
        cp_async_wait<0>();
        fence_proxy_async();  // this thread's K copies and V^T stores, read by wgmma
        mbar_arrive(&full[slot]);
      }
    }
    return;
  }

  setmaxnreg_inc<kConsumerRegs>();
  const int cw = wg - 1;  // consumer warpgroup
  const int pair0 = 64 * cw + 16 * (warp % 4);
  int wg_lo = INT_MAX, wg_hi = -1;  // the warpgroup's keys: the union of its rows' windows
  for (int r = 64 * cw / hg; r <= min(tile.num_rows - 1, (64 * cw + 63) / hg); ++r)
    wg_lo = min(wg_lo, lo_s[r]), wg_hi = max(wg_hi, pos_s[r]);
  int32_t row_lo[2], row_pos[2];  // the lane's two rows (pairs pair0 + g, pair0 + g + 8)
  lane_key_windows(tp, pair0, pos_s, lo_s, row_lo, row_pos);
  float M[2] = {-INFINITY, -INFINITY}, L_[2] = {0.f, 0.f}, A[DT][4];
#pragma unroll
  for (int i = 0; i < DT; ++i) A[i][0] = A[i][1] = A[i][2] = A[i][3] = 0.f;
  const uint32_t* qa = qs + cw * 8 * 32;  // this warpgroup's pair blocks

  // A turn: the wgmma chain between them is issued after the other warpgroup's previous one.
  auto turn_begin = [&] { named_barrier_sync<256>(1 + cw); };
  auto turn_end = [&](bool final) {
    if (!(final && cw == 1)) named_barrier_arrive<256>(2 - cw);
  };
  if (cw == 1) named_barrier_arrive<256>(1);  // warpgroup 0 takes the first turn

  // kPairs (bf16 operands only): the chunks two at a time. Both chunks' scores in one turn, their
  // softmaxes together (chunks_softmax_factors<2>: two independent chains through the shuffles and
  // exponentials; one chunk's chain alone leaves the warp waiting on each round trip, the third of
  // a chunk that the clock measurements found in the softmax), then each chunk's p·v in a turn of its
  // own and its merge, in chunk order. Each chunk's arithmetic and the merges' order are those of
  // the loop below: the same bits. Every chunk goes through the same instructions: one with no
  // valid key for a row (the loop below skips a chunk with none for the whole warpgroup) gives
  // that row m = -inf, which changes neither M, L nor A (chunks_softmax_factors,
  // merge_chunk_output); an odd last chunk's partner multiplies the last slot again and is masked
  // whole (its keys lie past kmax). One code path keeps the loop's instructions few (ptxas also
  // injected waits and spilled where wgmmas were issued under a per-chunk condition: C7517). A pair
  // waits on both chunks' `full` before either `empty`: the producer runs up to four slots ahead,
  // so chunk n + 1 never waits for chunk n's release. Both warpgroups take the same turns: one per
  // pair for the scores, one per chunk for p·v.
  if constexpr (kPairs) {
    for (int c0 = c_first, n = 0; c0 <= kmax; c0 += 2 * kChunkKeys, n += 2) {
      const bool two = c0 + kChunkKeys <= kmax, last = c0 + 2 * kChunkKeys > kmax;
      const int cs[2] = {c0, c0 + kChunkKeys}, slots[2] = {n % kSlots, (n + 1) % kSlots};
      mbar_wait(&full[slots[0]], (n / kSlots) & 1);
      if (two) mbar_wait(&full[slots[1]], ((n + 1) / kSlots) & 1);
      const uint8_t* slot_b[2] = {slot_at(slots[0]), slot_at(slots[1])};
      float sc[2][kChunkTiles][4];
      turn_begin();
      issue_chunk_scores_bf16<D>(sc[0], base + cw * 8 * 128, slot_b[0]);
      issue_chunk_scores_bf16<D>(sc[1], base + cw * 8 * 128, two ? slot_b[1] : slot_b[0]);
      turn_end(false);
      wgmma_wait<0>();
      float m[2][2], fo[2][2], fn[2][2];
      chunks_softmax_factors<2>(sc, row_lo, row_pos, cs, s, M, L_, m, fo, fn);
      uint32_t a[2][kChunkTiles / 2][4];  // p packed: the scores' registers are free before p·v
#pragma unroll
      for (int c = 0; c < 2; ++c) pack_chunk_p(sc[c], a[c]);
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        if (c == 1 && !two) break;
        float o[4 * DT];
        turn_begin();
        issue_packed_pv_bf16<D>(o, a[c], slot_b[c] + LB::k_bytes);
        turn_end(last && (c == 1 || !two));
        wgmma_wait<0>();
        if (lane == 0) mbar_arrive(&empty[slots[c]]);  // the warp's reads of the slot are done
        merge_chunk_output(A, o, m[c], fo[c], fn[c]);
      }
    }
  }
  for (int c0 = c_first, n = 0; !kPairs && c0 <= kmax; c0 += kChunkKeys, ++n) {
    const int slot = n % kSlots;
    const bool last = c0 + kChunkKeys > kmax;
    const float* ks = ring + slot * L::slot_words;
    const float* vt = ks + L::k_words;
    const bool live = __shfl_sync(0xffffffffu, c0 + kChunkKeys - 1 >= wg_lo && c0 <= wg_hi, 0);
    mbar_wait(&full[slot], (n / kSlots) & 1);  // also where not live: see the protocol above
    if (!live) {  // no valid key for the warpgroup: both turns passed, the slot released
      turn_begin();
      turn_end(false);
      turn_begin();
      turn_end(last);
      if (lane == 0) mbar_arrive(&empty[slot]);
      continue;
    }
    float sc[kChunkTiles][4];
    const uint8_t* slot_b = slot_at(slot);
    turn_begin();
    if constexpr (kBf16) issue_chunk_scores_bf16<D>(sc, base + cw * 8 * 128, slot_b);
    else issue_chunk_scores<D>(sc, qa, ks);
    turn_end(false);
    wgmma_wait<0>();
    float m[2], fo[2], fn[2];
    chunk_softmax_factors(sc, row_lo, row_pos, c0, s, M, L_, m, fo, fn);
    float o[4 * DT];
    turn_begin();
    if constexpr (kBf16) issue_chunk_pv_bf16<D>(o, sc, slot_b + LB::k_bytes);
    else issue_chunk_pv<D>(o, sc, vt);
    turn_end(last);
    wgmma_wait<0>();
    if (lane == 0) mbar_arrive(&empty[slot]);  // the warp's reads of the slot are done
    merge_chunk_output(A, o, m, fo, fn);
  }

  write_tile_rows(tp, pair0, s, D, 0, DT, M, L_, A, out);
#else
  __trap();  // built for sm_90 without the arch-specific features: never launched (attention_wgmma_supported)
#endif
}

template <int D>
constexpr size_t ring_smem_bytes() {
  return TACHYON_ATTENTION_BF16 ? WgmmaBf16Layout<D>::ring_bytes : WgmmaLayout<D>::ring_bytes;
}

template <int D, int kCode>
void launch_ring(const float* q, const DeviceAttentionMeta& meta, const QueryTile* tiles, int num_tiles,
                 const void* k_cache, const void* v_cache, const AttentionShape& shape, int heads_per_chunk,
                 float* out, cudaStream_t stream) {
  static const bool configured = [] {
    TACHYON_CUDA_CHECK(cudaFuncSetAttribute(attention_ring_kernel<D, kRingPairs, kCode>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(ring_smem_bytes<D>())));
    return true;
  }();
  (void)configured;
  launch(attention_ring_kernel<D, kRingPairs, kCode>, query_tile_grid(num_tiles, shape, heads_per_chunk),
         kRingThreads, ring_smem_bytes<D>(), stream, q, meta, tiles, k_cache, v_cache, shape, heads_per_chunk, out);
}

bool g_wgmma_on = true;  // set_attention_wgmma

}  // namespace

void set_attention_wgmma(bool on) { g_wgmma_on = on; }

bool attention_wgmma_supported(int head_dim) {
  return g_wgmma_on && device_arch().wgmma && (head_dim == 64 || head_dim == 128);
}

bool attention_wgmma_reads(KvFormat format) {
  return format == KvFormat::F32 || (!TACHYON_ATTENTION_BF16 && (format == KvFormat::BF16 || format == KvFormat::F16));
}

void attention_wgmma(const float* q, const DeviceAttentionMeta& meta, const QueryTile* tiles, int num_tiles,
                     const KvPair& kv, const AttentionShape& shape, int heads_per_chunk, float* out,
                     cudaStream_t stream) {
  if (!attention_wgmma_reads(kv.format())) fail_unsupported("wgmma attention KV format", kv.format_id);
  const auto go = [&](auto code) {
    constexpr int kCode = decltype(code)::value;
    if (shape.head_dim == 128)
      launch_ring<128, kCode>(q, meta, tiles, num_tiles, kv.k.base, kv.v.base, shape, heads_per_chunk, out, stream);
    else if (shape.head_dim == 64)
      launch_ring<64, kCode>(q, meta, tiles, num_tiles, kv.k.base, kv.v.base, shape, heads_per_chunk, out, stream);
    else
      fail_unsupported("wgmma attention head_dim (64 or 128)", shape.head_dim);
  };
#if !TACHYON_ATTENTION_BF16
  if (kv.format() == KvFormat::BF16) return go(std::integral_constant<int, kRingBf16>{});
  if (kv.format() == KvFormat::F16) return go(std::integral_constant<int, kRingF16>{});
#endif
  go(std::integral_constant<int, kRingF32>{});
}

}  // namespace tachyon::kernels::cuda
