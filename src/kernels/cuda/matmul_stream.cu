// The streaming decode matmul (matmul_stream.cuh): one CTA per SM streams its n-tiles' weights
// through a ring of slots. Longer than 500 lines: the two kernels (x held whole, x by segments) and
// the add_rms_norm staged inside the first share the ring protocol, its slot counts and the n-tile
// counter, which must change together.
#include "kernels/cuda/matmul_stream.cuh"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/rowwise.cuh"
#include "kernels/cuda/stream_ring.cuh"

#if TACHYON_PRE_HOPPER_DEVICE_CODE
#pragma nv_diag_suppress 177  // the Hopper kernels' helpers, unreferenced where those kernels are traps
#endif

namespace tachyon::kernels::cuda {
namespace {

// A unit is one (n-tile, 512-k segment) of the fragment layout: 16 k-pairs x 512 B = 8 KB,
// contiguous in memory (an n-tile's k-pairs are consecutive), so one bulk copy moves it.
constexpr int kUnitPairs = static_cast<int>(kSegmentK / 32);
constexpr int kUnitBytes = kUnitPairs * 512;
static_assert(kUnitBytes == kStreamUnitBytes, "a bf16 unit is one bulk copy of the ring");
size_t stream_smem_bytes(int64_t rows, int64_t k, int slots) {
  const size_t segments = static_cast<size_t>(ceil_div(round_up(k, kMmaColPad), kSegmentK));
  const size_t sums = 2 * kStreamConsumerWarps * segments * static_cast<size_t>(rows) * 4 * sizeof(float2);
  const size_t ring = static_cast<size_t>(slots) * (kUnitBytes + 2 * sizeof(uint64_t));  // units and barriers
  const size_t ids = kTileIdSlots * sizeof(uint64_t);
  return ring + ids + static_cast<size_t>(rows) * x_row_words(k) * sizeof(uint32_t) + sums;
}

// Ring slots: a multiple of the consumer warps, so that every unit of a slot goes to one warp
// (unit u: slot u % slots, warp u % 8), which takes them in order: a warp never waits on a slot's
// barrier for a phase two ahead of the slot's current one (parity waits cannot tell those apart).
// kStreamSlots by default: 8 slots, 8 where two CTAs share an SM, or the most that fit all ran
// slower or no faster (H200: 200.3 / 200.4 / 205.1 tok/s against 205.8 at batch 1,
// docs/perf/cuda.md).
constexpr int kMaxStreamSlots = 24;
// The most slots that fit beside x and the segment sums (kStreamSlots at least).
int most_stream_slots(int64_t rows, int64_t k) {
  int slots = kMaxStreamSlots;
  while (slots > kStreamSlots && stream_smem_bytes(rows, k, slots) > kStreamSmemLimit) slots -= kStreamConsumerWarps;
  return slots;
}
int stream_slots(int64_t rows, int64_t k) { return kStreamSlots; }

// A launch that stages a fused add_rms_norm (StreamAddNorm) follows a streaming matmul, and its
// staging after the programmatic wait (every row's norm) is the longest of the stream's (H200,
// batch 1: 2.8 us, docs/perf/cuda.md). A wide one (n >= 16384: an MLP's gate_up)
// takes the most slots that fit, so that more of its weight has landed when the staging ends; a
// narrower one (a q/k/v projection) keeps kStreamSlots, which leaves room beside it for the
// attention CTAs that follow it. H200, same call, two alternating rounds: device wait per batch-1
// step 4237.6 / 4235.9 us against 4259.1 / 4250.7 (-0.4%); the most slots for every fused launch
// -0.2% (docs/perf/cuda.md).
int normed_stream_slots(int64_t rows, int64_t k, int64_t n) {
  return n < 16384 ? stream_slots(rows, k) : most_stream_slots(rows, k);
}

static_assert(kStreamConsumerWarps * 32 == kWideNormThreads, "the fused norm runs on the consumer warps");

// Row r of x + y, as the add_rms_norm kernel holds it (thread t: float4s t, t + 256, ...).
__device__ __forceinline__ void load_added_row(const StreamAddNorm& norm, int r, int K, float4 (&v)[kWideMaxVec]) {
  load_added_row4(reinterpret_cast<const float4*>(norm.x + static_cast<int64_t>(r) * K),
                  reinterpret_cast<const float4*>(norm.y + static_cast<int64_t>(r) * K), K / 4, v);
}

// The fused add_rms_norm (StreamAddNorm): stage the normed rows as bf16 pairs; the CTA that
// stages last then writes x + y and the normed rows (recomputed: the same bits).
__device__ void stage_added_norm(const StreamAddNorm& norm, int M, int K, const float4 (&g)[kWideMaxVec],
                                 uint32_t* xs, int row_words, int pair_count) {
  __shared__ float warp_sums[kStreamMaxRows][kStreamConsumerWarps];
  __shared__ float inv_s[kStreamMaxRows];
  __shared__ bool last_s;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int r = 0; r < M; ++r) {
    float4 v[kWideMaxVec];
    load_added_row(norm, r, K, v);
    const float sum = warp_sum(thread_sum_squares(v));
    if (lane == 0) warp_sums[r][warp] = sum;
    named_barrier_sync<kWideNormThreads>(1);
    const float inv = inv_rms(sum_in_warp_order(warp_sums[r]), K, norm.eps);
    if (threadIdx.x == 0) inv_s[r] = inv;
#pragma unroll
    for (int j = 0; j < kWideMaxVec; ++j) {
      const int i = threadIdx.x + kWideNormThreads * j;
      if (i < K / 4) {
        const float4 n = rms_scaled4(v[j], inv, g[j], norm.weight_offset);
        *reinterpret_cast<uint2*>(xs + r * row_words + 2 * i) = make_uint2(pack_bf16x2(n.x, n.y), pack_bf16x2(n.z, n.w));
      }
    }
    for (int p = K / 2 + threadIdx.x; p < pair_count; p += kWideNormThreads) xs[r * row_words + p] = 0u;
  }
  // Every thread's loads of x have returned (their values are in the sums above the barriers).
  if (threadIdx.x == 0) last_s = atomicAdd(norm.arrivals, 1u) == gridDim.x - 1;
  named_barrier_sync<kWideNormThreads>(1);
  if (!last_s) return;
  for (int r = 0; r < M; ++r) {
    float4 v[kWideMaxVec];
    load_added_row(norm, r, K, v);
    auto* xr = reinterpret_cast<float4*>(norm.x + static_cast<int64_t>(r) * K);
    auto* outr = reinterpret_cast<float4*>(norm.out + static_cast<int64_t>(r) * K);
#pragma unroll
    for (int j = 0; j < kWideMaxVec; ++j) {
      const int i = threadIdx.x + kWideNormThreads * j;
      if (i < K / 4) xr[i] = v[j], outr[i] = rms_scaled4(v[j], inv_s[r], g[j], norm.weight_offset);
    }
  }
  if (threadIdx.x == 0) *norm.arrivals = 0u;
}

// A CTA's n-tiles (TileSchedule), as the producer posts them; units n-tile-major (memory order)
// through ring slot u % slots; the consumer warps take them round-robin (unit u: warp u % 8),
// whatever the number of n-tiles, so a CTA with four n-tiles still runs eight MMA chains at once.
// A consumer releases a slot as soon as its fragments are in registers. Each unit's segment sum
// goes to shared memory; per round of 8 n-tiles the consumers meet at a barrier and warp w adds
// n-tile w's segment sums in segment order (double-buffered by round parity, so one barrier per
// round). The producer ends by posting -1 up to the end of the round after its last n-tile, so
// every consumer learns where the n-tiles end from a post it waits for. kGather: the n-tiles of
// routed experts (StreamGather; w, N, bias and norm unused).
template <bool kGather>
__global__ void __launch_bounds__(kStreamThreads, 1)
    matmul_stream_kernel(const float* __restrict__ x, int M, int K, const uint4* __restrict__ w, int N, int kp_count,
                         int n_tiles, const float* __restrict__ bias, float* __restrict__ out, int slots,
                         StreamAddNorm norm, TileSchedule schedule, StreamGather gather) {
#if TACHYON_PRE_HOPPER_DEVICE_CODE  // Hopper-only (device_arch.h): never launched where this is compiled
  __trap();
#else
  extern __shared__ __align__(128) uint4 smem_stream[];
  __shared__ const void* slot_weights[kGather ? kStreamMaxGatherSlots : 1];  // each slot's expert matrix
  const int tiles_per_slot = gather.n_local / 8;
  uint4* ring = smem_stream;
  auto* full = reinterpret_cast<uint64_t*>(smem_stream + static_cast<size_t>(slots) * kUnitBytes / sizeof(uint4));
  uint64_t* empty = full + slots;
  uint64_t* ids = empty + slots;
  auto* xs = reinterpret_cast<uint32_t*>(ids + kTileIdSlots);  // [M][row_words] bf16 pairs
  const int row_words = x_row_words(K), pair_count = kp_count * 16;  // bf16 pairs per padded row
  const int num_segments = (kp_count + kUnitPairs - 1) / kUnitPairs;
  // [2 round parities][8 n-tiles][segments][M rows x 4 lanes] float2: a unit's sums for rows < M
  auto* sums = reinterpret_cast<float2*>(xs + M * row_words);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x < kTileIdSlots) ids[threadIdx.x] = ~uint64_t{0};  // a tag no post has
  start_ring(full, empty, slots);

  if (warp == kStreamConsumerWarps) {
    // Producer: weights are constant, so they stream before pdl_wait (during the previous kernel),
    // except routed experts, which the previous kernels choose.
    if constexpr (kGather) {
      pdl_wait();
      for (int s = lane; s < gather.slots; s += 32) {
        const int e = gather.ids[s];
        slot_weights[s] = gather.table[e >= 0 && e < gather.experts ? e : 0];
      }
      __syncwarp();
    }
    if (lane != 0) return;
    const uint64_t policy = l2_evict_first_policy();  // weights are read once per step
    int u = 0;                                         // units issued
    produce_stream_tiles(schedule, n_tiles, ids, [&](int j, int tile) {
      const uint4* tile_w = w + static_cast<int64_t>(tile) * kp_count * 32;
      if constexpr (kGather) {
        const int slot = tile / tiles_per_slot;
        tile_w = static_cast<const uint4*>(slot_weights[slot]) +
                 static_cast<int64_t>(tile - slot * tiles_per_slot) * kp_count * 32;
      }
      for (int seg = 0; seg < num_segments; ++seg, ++u) {
        const int slot = u % slots;
        if (u >= slots) mbar_wait(&empty[slot], ((u / slots) - 1) & 1);
        if (seg == 0) post_tile(ids, j, tile);  // before the arrive that releases the unit
        const uint32_t bytes = static_cast<uint32_t>(min(kUnitPairs, kp_count - seg * kUnitPairs) * 512);
        mbar_arrive_expect_tx(&full[slot], bytes);
        bulk_load(ring + slot * (kUnitBytes / 16), tile_w + seg * kUnitPairs * 32, bytes, &full[slot], policy);
      }
    });
    return;
  }

  float4 norm_w[kWideMaxVec];  // the fused norm's weight: constant, loaded before the wait
#pragma unroll
  for (int j = 0; j < kWideMaxVec; ++j) {
    const int i = threadIdx.x + kWideNormThreads * j;
    norm_w[j] = !kGather && norm.x && i < K / 4 ? reinterpret_cast<const float4*>(norm.w)[i]
                                                 : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  pdl_wait();
  if (!kGather && norm.x) {
    stage_added_norm(norm, M, K, norm_w, xs, row_words, pair_count);
  } else {
    stage_rows(x, M, K, xs, row_words, pair_count);
  }
  constexpr int kConsumerThreads = kStreamConsumerWarps * 32;
  named_barrier_sync<kConsumerThreads>(1);  // consumers only
  cta_timeline_mark(kTimelineStaged);

  const int g = lane / 4, c = lane % 4;
  const uint32_t* x_lane = xs + g * row_words + c;  // A rows g (< M); rows 8-15 are zero
  const int round_units = kStreamConsumerWarps * num_segments;
  for (int round = 0;; ++round) {
    const int first = round * kStreamConsumerWarps;  // the round's first n-tile (the CTA's j)
    float2* round_sums = sums + (round & 1) * kStreamConsumerWarps * num_segments * M * 4;
    for (int i = warp; i < round_units; i += kStreamConsumerWarps) {
      // Posts come in order, so the n-tiles end at the first -1.
      if (posted_tile(ids, first + i / num_segments) < 0) break;
      const int u = round * round_units + i, slot = u % slots, seg = i % num_segments;
      const int pairs = min(kUnitPairs, kp_count - seg * kUnitPairs);
      mbar_wait(&full[slot], (u / slots) & 1);
      uint4 b[kUnitPairs];
      const uint4* unit = ring + slot * (kUnitBytes / 16);
#pragma unroll
      for (int p = 0; p < kUnitPairs; ++p) b[p] = p < pairs ? unit[p * 32 + lane] : make_uint4(0, 0, 0, 0);
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[slot]);
      float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int p = 0; p < kUnitPairs; ++p) {
        if (p >= pairs) break;
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          const int kt = (seg * kUnitPairs + p) * 2 + t;
          uint32_t a[4] = {0u, 0u, 0u, 0u};
          if (g < M) a[0] = x_lane[8 * kt], a[2] = x_lane[8 * kt + 4];
          mma_bf16(acc, a, t == 0 ? b[p].x : b[p].z, t == 0 ? b[p].y : b[p].w);
        }
      }
      if (g < M) round_sums[i * M * 4 + lane] = make_float2(acc[0], acc[1]);  // [tile][seg] = i
    }
    named_barrier_sync<kConsumerThreads>(1);
    // Every post of the round has been made: its n-tiles' units were taken, or the -1s that end
    // them were posted through the round's end.
    const int tile = posted_tile(ids, first + warp);
    if (tile >= 0) {
      const float2* tile_sums = round_sums + warp * num_segments * M * 4;
      if constexpr (kGather) {
        // Slot s's outputs, from its x row alone (+ 0.f: the bits of the other kernels' absent bias).
        const int slot = tile / tiles_per_slot;
        if (g == slot / gather.slots_per_row) {
          const float2 total = tile_total(tile_sums, num_segments, M);
          float* o = out + static_cast<int64_t>(slot) * gather.n_local + (tile - slot * tiles_per_slot) * 8 + 2 * c;
          o[0] = total.x + 0.f, o[1] = total.y + 0.f;
        }
      } else {
        write_tile_totals(tile_sums, num_segments, M, tile, N, bias, out);
      }
    }
    if (posted_tile(ids, first + kStreamConsumerWarps - 1) < 0) break;  // the last round
  }
  cta_timeline_mark(kTimelineDone);
#endif
}

// When x [M, K] does not fit beside the ring as bf16 (8 rows of k 12288: 196 KB), the CTA's units
// go segment-major instead (per round of up to 8 n-tiles: every n-tile's unit of segment 0, then
// of segment 1, ...) and x comes by 512-k segments through a ring of kWindowXSlots slots of bf16
// pairs, laid out as the whole-x kernel's rows (stage_rows_batched's bits). The consumer warps
// stage x themselves with ordinary loads, kWindowAhead segments ahead: at segment v every
// consumer thread issues its loads of segment v + ahead, runs its warp's unit of segment v (at
// most one: unit i = seg·width + t goes to warp i % 8), stores the loaded pairs, and the
// consumers meet at a barrier (the stored slot is complete; the slot read at v is free for
// v + ahead + 1). A first version copied x by bulk copies from a producer lane, f32,
// two segments ahead: the first segment landed 4.9 us after the wait (behind the ring's 128 KB
// of weight copies, likely) and down at 8 rows took 38.0 us against 23.6 us of bytes; this one
// took the decode step's device time 3.0% lower at batch 4 and 1.0% at batch 8 (H200,
// docs/perf/cuda.md). Same units, same MMA chains, same segment sums added in
// segment order: the bits of every other kernel.
constexpr int kWindowXSlots = 4;
constexpr int kWindowAhead = kWindowXSlots - 1;
constexpr int kWindowRowWords = static_cast<int>(kSegmentK) / 2 + 4;  // rows 4 banks apart, as x_row_words
constexpr int kWindowMaxVec = kStreamMaxRows * static_cast<int>(kSegmentK) / 4 / (kStreamConsumerWarps * 32);

size_t window_smem_bytes(int64_t rows, int64_t k, int slots) {
  const size_t segments = static_cast<size_t>(k / kSegmentK);
  const size_t ring = static_cast<size_t>(slots) * (kUnitBytes + 2 * sizeof(uint64_t));
  const size_t x_ring = kWindowXSlots * static_cast<size_t>(rows) * kWindowRowWords * sizeof(uint32_t);
  const size_t sums = kStreamConsumerWarps * segments * static_cast<size_t>(rows) * 4 * sizeof(float2);
  return ring + x_ring + sums;
}

// The ring slots beside the x ring and the sums: kStreamSlots where they fit (8 rows up to k
// 16384), else 0: those shapes take the split-K kernel. An 8-slot ring would take k up to 32768 at 8 rows (70B-class down projections) but has
// not run on a device yet.
int window_slots(int64_t rows, int64_t k) {
  if (rows < 1 || rows > kStreamMaxRows || k % kSegmentK != 0) return 0;
  return window_smem_bytes(rows, k, kStreamSlots) <= kStreamSmemLimit ? kStreamSlots : 0;
}

// Segment `seg` of x's M rows: this consumer thread's float4s (slot i: float4 tid + 256 i of the
// segment's M x 128), loaded now, stored as bf16 pairs later.
struct XSegmentLoads {
  float4 v[kWindowMaxVec];
  __device__ void load(const float* __restrict__ x, int M, int K, int seg) {
#pragma unroll
    for (int j = 0; j < kWindowMaxVec; ++j) {
      const int i = threadIdx.x + j * kStreamConsumerWarps * 32, r = i / 128, c = i % 128;
      if (r < M) v[j] = reinterpret_cast<const float4*>(x + static_cast<int64_t>(r) * K + seg * kSegmentK)[c];
    }
  }
  __device__ void store(int M, uint32_t* slot) const {
#pragma unroll
    for (int j = 0; j < kWindowMaxVec; ++j) {
      const int i = threadIdx.x + j * kStreamConsumerWarps * 32, r = i / 128, c = i % 128;
      if (r < M)
        *reinterpret_cast<uint2*>(slot + r * kWindowRowWords + 2 * c) =
            make_uint2(pack_bf16x2(v[j].x, v[j].y), pack_bf16x2(v[j].z, v[j].w));
    }
  }
};

__global__ void __launch_bounds__(kStreamThreads, 1)
    matmul_stream_window_kernel(const float* __restrict__ x, int M, int K, const uint4* __restrict__ w, int N,
                                int kp_count, int n_tiles, const float* __restrict__ bias, float* __restrict__ out,
                                int slots) {
#if TACHYON_PRE_HOPPER_DEVICE_CODE  // Hopper-only (device_arch.h): never launched where this is compiled
  __trap();
#else
  extern __shared__ __align__(128) uint4 smem_stream[];
  uint4* ring = smem_stream;
  auto* full = reinterpret_cast<uint64_t*>(smem_stream + static_cast<size_t>(slots) * kUnitBytes / sizeof(uint4));
  uint64_t* empty = full + slots;
  auto* x_ring = reinterpret_cast<uint32_t*>(empty + slots);  // [slot][M][kWindowRowWords]
  // [8 n-tiles][segments][M rows x 4 lanes] float2: one round's segment sums
  auto* sums = reinterpret_cast<float2*>(x_ring + kWindowXSlots * M * kWindowRowWords);
  const int num_segments = K / static_cast<int>(kSegmentK);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tile_begin = static_cast<int>(static_cast<int64_t>(blockIdx.x) * n_tiles / gridDim.x);
  const int tile_end = static_cast<int>(static_cast<int64_t>(blockIdx.x + 1) * n_tiles / gridDim.x);
  const int my_tiles = tile_end - tile_begin;
  const int rounds = (my_tiles + kStreamConsumerWarps - 1) / kStreamConsumerWarps;
  const auto round_width = [&](int round) {
    return min(kStreamConsumerWarps, my_tiles - round * kStreamConsumerWarps);
  };
  start_ring(full, empty, slots);

  if (warp == kStreamConsumerWarps) {  // producer: weights are constant, streamed before the wait
    if (lane != 0) return;
    const uint64_t policy = l2_evict_first_policy();
    for (int round = 0, u = 0; round < rounds; ++round) {
      const int width = round_width(round), tile0 = tile_begin + round * kStreamConsumerWarps;
      for (int i = 0; i < width * num_segments; ++i, ++u) {
        const int slot = u % slots, seg = i / width, tile = tile0 + i % width;
        if (u >= slots) mbar_wait(&empty[slot], ((u / slots) - 1) & 1);
        mbar_arrive_expect_tx(&full[slot], kUnitBytes);
        const uint4* unit = w + (static_cast<int64_t>(tile) * kp_count + seg * kUnitPairs) * 32;
        bulk_load(ring + slot * (kUnitBytes / 16), unit, kUnitBytes, &full[slot], policy);
      }
    }
    return;
  }

  constexpr int kConsumerThreads = kStreamConsumerWarps * 32;
  const int total_segments = rounds * num_segments;  // x is read again in every round
  const auto x_slot = [&](int v) { return x_ring + (v % kWindowXSlots) * M * kWindowRowWords; };
  pdl_wait();
  {
    XSegmentLoads first[kWindowAhead];  // every load in flight before the first store
#pragma unroll
    for (int v = 0; v < kWindowAhead; ++v)
      if (v < total_segments) first[v].load(x, M, K, v % num_segments);
#pragma unroll
    for (int v = 0; v < kWindowAhead; ++v)
      if (v < total_segments) first[v].store(M, x_slot(v));
  }
  named_barrier_sync<kConsumerThreads>(1);
  cta_timeline_mark(kTimelineStaged);
  const int g = lane / 4, c = lane % 4;
  for (int round = 0, u0 = 0, v0 = 0; round < rounds; ++round) {
    const int width = round_width(round);
    for (int seg = 0; seg < num_segments; ++seg) {
      const int v = v0 + seg;
      XSegmentLoads next;
      const bool stages = v + kWindowAhead < total_segments;
      if (stages) next.load(x, M, K, (v + kWindowAhead) % num_segments);
      const int t = ((warp - seg * width) % kStreamConsumerWarps + kStreamConsumerWarps) % kStreamConsumerWarps;
      if (t < width) {
        const int i = seg * width + t, u = u0 + i, slot = u % slots;
        mbar_wait(&full[slot], (u / slots) & 1);
        uint4 b[kUnitPairs];
        const uint4* unit = ring + slot * (kUnitBytes / 16);
#pragma unroll
        for (int p = 0; p < kUnitPairs; ++p) b[p] = unit[p * 32 + lane];
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[slot]);
        const uint32_t* x_lane = x_slot(v) + g * kWindowRowWords + c;  // A rows g (< M); rows 8-15 are zero
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int p = 0; p < kUnitPairs; ++p) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int kt = p * 2 + h;  // the k-tile within the segment
            uint32_t a[4] = {0u, 0u, 0u, 0u};
            if (g < M) a[0] = x_lane[8 * kt], a[2] = x_lane[8 * kt + 4];
            mma_bf16(acc, a, h == 0 ? b[p].x : b[p].z, h == 0 ? b[p].y : b[p].w);
          }
        }
        if (g < M) sums[(t * num_segments + seg) * M * 4 + lane] = make_float2(acc[0], acc[1]);
      }
      if (stages) next.store(M, x_slot(v + kWindowAhead));
      named_barrier_sync<kConsumerThreads>(1);  // slot v + ahead complete, slot v free
    }
    if (warp < width)
      write_tile_totals(sums + warp * num_segments * M * 4, num_segments, M,
                        tile_begin + round * kStreamConsumerWarps + warp, N, bias, out);
    named_barrier_sync<kConsumerThreads>(1);  // read before the next round writes them
    u0 += width * num_segments, v0 += num_segments;
  }
  cta_timeline_mark(kTimelineDone);
#endif
}

}  // namespace

// The counters of taken n-tiles: one pair per stream (kernels on one stream run one at a time
// past their waits; two streams must not share a pair), zero-initialised with the module.
constexpr int kCounterStreams = 64;
__device__ unsigned g_stream_tile_counters[kCounterStreams][2];

unsigned* stream_tile_counters(cudaStream_t stream) {
  static std::mutex mutex;
  static std::vector<std::pair<cudaStream_t, unsigned*>> known;  // few streams: a linear search
  std::lock_guard<std::mutex> lock(mutex);
  // The symbol's address is the current device's: a stream's first matmul runs on its device.
  for (const auto& [s, taken] : known)
    if (s == stream) return taken;
  if (known.size() >= kCounterStreams) return nullptr;  // static shares from then on
  void* base = nullptr;
  TACHYON_CUDA_CHECK(cudaGetSymbolAddress(&base, g_stream_tile_counters));
  unsigned* taken = static_cast<unsigned*>(base) + 2 * known.size();
  known.emplace_back(stream, taken);
  return taken;
}

int first_static_tiles(int n_tiles, int grid, int units_per_tile, int slots) {
  const int first_static = static_cast<int>(ceil_div(slots, units_per_tile));
  return n_tiles > static_cast<int64_t>(first_static) * grid ? first_static : 0;
}
TileSchedule tile_schedule(int n_tiles, int grid, int units_per_tile, int slots, cudaStream_t stream) {
  const int first_static = first_static_tiles(n_tiles, grid, units_per_tile, slots);
  unsigned* taken = first_static > 0 ? stream_tile_counters(stream) : nullptr;
  return taken ? TileSchedule{taken, first_static} : TileSchedule{};
}

namespace {
// n-tile units of the bf16 layout: one per 512-k segment.
int bf16_units_per_tile(int kp_count) { return static_cast<int>(ceil_div(kp_count, kUnitPairs)); }
}  // namespace

// The kernels are Hopper's (bulk copies into mbarrier-counted rings): elsewhere no matmul streams
// and the decode dispatch (matmul.cu) takes the mma.sync kernels.
bool stream_matmul_holds_x(int64_t rows, int64_t k) {
  return device_arch().hopper && rows >= 1 && rows <= kStreamMaxRows && stream_smem_bytes(rows, k, kStreamSlots) <= kStreamSmemLimit;
}
bool stream_matmul_fits(int64_t rows, int64_t k) {
  return stream_matmul_holds_x(rows, k) || (device_arch().hopper && window_slots(rows, k) > 0);
}
bool stream_matmul_takes(const float* x, int64_t rows, int64_t k) {
  return stream_matmul_holds_x(rows, k) ||
         (device_arch().hopper && window_slots(rows, k) > 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0);
}

namespace {
// The SM count, once the streaming kernels may take kStreamSmemLimit of dynamic shared memory.
int stream_sm_count() {
  static const int sm_count = [] {
    const int count = device_attribute(cudaDevAttrMultiProcessorCount);
    for (const void* kernel : {reinterpret_cast<const void*>(matmul_stream_kernel<false>),
                               reinterpret_cast<const void*>(matmul_stream_kernel<true>),
                               reinterpret_cast<const void*>(matmul_stream_window_kernel)})
      TACHYON_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(kStreamSmemLimit)));
    return count;
  }();
  return sm_count;
}
}  // namespace

void matmul_stream(const float* x, int M, int K, const uint4* w, int N, int kp_count, const float* bias, float* out,
                   cudaStream_t stream, const StreamAddNorm& norm) {
  const int sm_count = stream_sm_count();
  const int n_tiles = static_cast<int>(ceil_div(N, 8));
  const unsigned grid = static_cast<unsigned>(std::min(sm_count, n_tiles));
  if (!stream_matmul_holds_x(M, K)) {
    // The fused norm normalises whole rows; by segments x must be 16-byte aligned (float4 loads).
    if (norm.x) fail_unsupported("streaming matmul after add_rms_norm, k", K);
    if (!stream_matmul_takes(x, M, K)) fail_unsupported("streaming matmul by x segments, k", K);
    const int slots = window_slots(M, K);
    launch(matmul_stream_window_kernel, grid, kStreamThreads, window_smem_bytes(M, K, slots), stream, x, M, K, w, N,
           kp_count, n_tiles, bias, out, slots);
    return;
  }
  const int slots = norm.x ? normed_stream_slots(M, K, N) : stream_slots(M, K);
  launch(matmul_stream_kernel<false>, grid, kStreamThreads, stream_smem_bytes(M, K, slots), stream, x, M, K, w, N,
         kp_count, n_tiles, bias, out, slots, norm,
         tile_schedule(n_tiles, static_cast<int>(grid), bf16_units_per_tile(kp_count), slots, stream), StreamGather{});
}

bool stream_gather_fits(int64_t rows, int64_t k, int64_t slots, int64_t n_local) {
  return stream_matmul_holds_x(rows, k) && slots >= 1 && slots <= kStreamMaxGatherSlots && n_local > 0 &&
         n_local % 8 == 0 && slots * (n_local / 8) <= (int64_t{1} << 30);
}

void matmul_stream_gathered(const float* x, int M, int K, int kp_count, const StreamGather& gather, float* out,
                            cudaStream_t stream) {
  if (!stream_gather_fits(M, K, gather.slots, gather.n_local))
    fail_unsupported("gathered streaming matmul, slots", gather.slots);
  const int n_tiles = gather.slots * (gather.n_local / 8);
  const unsigned grid = static_cast<unsigned>(std::min(stream_sm_count(), n_tiles));
  const int slots = stream_slots(M, K);
  launch(matmul_stream_kernel<true>, grid, kStreamThreads, stream_smem_bytes(M, K, slots), stream, x, M, K,
         static_cast<const uint4*>(nullptr), gather.n_local, kp_count, n_tiles, static_cast<const float*>(nullptr), out,
         slots, StreamAddNorm{},
         tile_schedule(n_tiles, static_cast<int>(grid), bf16_units_per_tile(kp_count), slots, stream), gather);
}

StreamTiles stream_tiles(int64_t rows, int64_t n, int64_t k) {
  if (!stream_matmul_holds_x(rows, k)) return {};
  const int n_tiles = static_cast<int>(ceil_div(n, 8));
  const int grid = std::min(device_attribute(cudaDevAttrMultiProcessorCount), n_tiles);
  const int kp_count = static_cast<int>(round_up(k, kMmaColPad) / 32);
  const int first_static = first_static_tiles(n_tiles, grid, bf16_units_per_tile(kp_count), stream_slots(rows, k));
  return {first_static > 0, first_static * grid};
}

bool stream_tile_counters_are_zero(cudaStream_t stream) {
  unsigned* taken = stream_tile_counters(stream);
  if (!taken) return true;
  unsigned host[2];
  TACHYON_CUDA_CHECK(cudaMemcpyAsync(host, taken, sizeof(host), cudaMemcpyDeviceToHost, stream));
  TACHYON_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host[0] == 0 && host[1] == 0;
}

}  // namespace tachyon::kernels::cuda
