// The streaming decode matmul of quantized weights (1-8 rows, Hopper; matmul_quant.cuh): the bf16
// streaming kernel's ring (stream_ring.cuh) carrying packed codes. A ring unit is 8 KB of one row
// tile's codes (quant_layout.h: a row tile's codes are contiguous), i.e. 2 segments of 8-bit codes
// or 4 of 4-bit ones, and beside it in the same slot the scales (and biases) of those columns'
// groups for the tile's 8 rows (contiguous too: quant_layout.h stores them row tile by row tile),
// copied by the same producer lane on the same barrier. A consumer warp takes its unit's codes into
// registers, decodes each 32-column unit into B fragments with its scales from shared memory (the
// split-K kernel's arithmetic: quant_common.cuh), runs one MMA chain per 512-k segment and leaves
// the segment sums for the round's end, where they are added in segment order: the canonical
// order, so every row has the bits of the split-K kernel and of the bf16 path on the dequantized
// matrix. The slot is released once its unit is decoded (its scales are read during the decode).
#include <algorithm>
#include <type_traits>

#include "kernels/cuda/device_arch.h"
#include "kernels/cuda/matmul_quant.cuh"
#include "kernels/cuda/matmul_stream.cuh"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/quant_common.cuh"
#include "kernels/cuda/stream_ring.cuh"

#if TACHYON_PRE_HOPPER_DEVICE_CODE
#pragma nv_diag_suppress 177  // the Hopper kernel's helpers, unreferenced where that kernel is a trap
#endif

namespace tachyon::kernels::cuda {
namespace {

constexpr int kSegmentUnits = static_cast<int>(kSegmentK / 32);  // 32-column units per segment
constexpr int kChunkVectors = static_cast<int>(QuantMatrix::kStreamUnitVectors);  // 512-byte warp loads per unit
static_assert(kChunkVectors * 512 == kStreamUnitBytes, "a unit of codes is one bulk copy of the ring");
// Groups of at most 512 columns: a ring unit then holds whole groups (groups are powers of two).
constexpr int64_t kMaxStreamGroup = kSegmentK;

// What the kernel needs of a launch besides the matrix.
struct QuantStreamShape {
  int M = 0, K = 0, N = 0;
  int kp_count = 0;          // 32-column units per row tile
  int vectors_per_tile = 0;  // 512-byte warp loads of codes per row tile
  int units_per_tile = 0;    // ring units per row tile
  int groups = 0;            // scale groups per row (0: Dense I8)
  int group_span = 0;        // groups per ring unit (0: Dense I8)
  int scale_bytes = 0;       // bytes of one scale or bias
  int scale_area = 0;        // a slot's bytes of scales (+ biases), beside its codes
  int n_tiles = 0, slots = 0;
};

// The slot's scales: groups covered by a full unit x 8 rows, twice for Affine's biases.
int scale_area_bytes(const QuantMatrix& w) {
  if (w.kind == kQuantInt8Rows) return 0;
  const int64_t one = w.stream_unit_columns() / w.group * 8 * (w.scale_type == kScaleF32 ? 4 : 2);
  const bool affine = w.kind == kQuantAffine4 || w.kind == kQuantAffine8;
  return static_cast<int>(affine ? 2 * one : one);
}

size_t quant_stream_smem_bytes(int64_t rows, const QuantMatrix& w, int slots) {
  const size_t segments = static_cast<size_t>(ceil_div(w.units_per_row_tile(), kSegmentUnits));
  const size_t sums = 2 * kStreamConsumerWarps * segments * static_cast<size_t>(rows) * 4 * sizeof(float2);
  const size_t ring = static_cast<size_t>(slots) * (kStreamUnitBytes + scale_area_bytes(w) + 2 * sizeof(uint64_t));
  const size_t ids = kTileIdSlots * sizeof(uint64_t);
  return ring + ids + static_cast<size_t>(rows) * x_row_words(w.cols) * sizeof(uint32_t) + sums;
}

// kStreamSlots where they fit beside x and the sums, else 8 (4 units per warp), else 0: not taken.
int quant_stream_slots(int64_t rows, const QuantMatrix& w) {
  for (int slots : {kStreamSlots, kStreamConsumerWarps})
    if (quant_stream_smem_bytes(rows, w, slots) <= kStreamSmemLimit) return slots;
  return 0;
}

// A group's scale in shared memory (quant_layout.h's types; load_quant_scale's values).
template <int kScale>
__device__ __forceinline__ float shared_quant_scale(const unsigned char* area, int i) {
  if constexpr (kScale == kScaleF32) return reinterpret_cast<const float*>(area)[i];
  const unsigned short bits = reinterpret_cast<const unsigned short*>(area)[i];
  if constexpr (kScale == kScaleF16) return __half2float(__ushort_as_half(bits));
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

// The ring protocol of matmul_stream_kernel (stream_ring.cuh) over units of codes: unit ui of an
// n-tile is its vectors [16 ui, 16 ui + 16) (32 or 64 32-column units: segments 2 ui.. or 4 ui..)
// and the scales of their groups. Consumers take units round-robin (unit u: slot u % slots,
// warp u % 8), each unit's segment sums go to shared memory, and per round of 8 n-tiles warp w
// adds n-tile w's in segment order (double-buffered by round parity). Instantiated per kind and
// scale type (kScale: a branch per scale load would sit in the decode loop), and with kPairs for
// matrices with bf16_pairs (quant_pair_fragment's decode, the same bits).
template <int kKind, int kScale, bool kPairs>
__global__ void __launch_bounds__(kStreamThreads, 1)
    matmul_quant_stream_kernel(const float* __restrict__ x, QuantMatrix w, QuantStreamShape sh,
                               const float* __restrict__ bias, float* __restrict__ out, TileSchedule schedule) {
#if TACHYON_PRE_HOPPER_DEVICE_CODE  // Hopper-only (device_arch.h): never launched where this is compiled
  __trap();
#else
  constexpr int kUnitsPerVector = quant_kind_bits(kKind) == 8 ? 2 : 4;
  constexpr int kUnitSegments = kChunkVectors * kUnitsPerVector / kSegmentUnits;  // 2 or 4
  constexpr bool kAffine = kKind == kQuantAffine4 || kKind == kQuantAffine8;
  constexpr bool kGrouped = kKind != kQuantInt8Rows;
  const int M = sh.M, slots = sh.slots, upt = sh.units_per_tile;
  extern __shared__ __align__(128) uint4 smem_quant_stream[];
  uint4* ring = smem_quant_stream;
  auto* scale_areas = reinterpret_cast<unsigned char*>(ring + static_cast<size_t>(slots) * (kStreamUnitBytes / 16));
  auto* full = reinterpret_cast<uint64_t*>(scale_areas + static_cast<size_t>(slots) * sh.scale_area);
  uint64_t* empty = full + slots;
  uint64_t* ids = empty + slots;
  auto* xs = reinterpret_cast<uint32_t*>(ids + kTileIdSlots);  // [M][row_words] bf16 pairs
  const int row_words = x_row_words(sh.K), pair_count = sh.kp_count * 16;
  const int num_segments = (sh.kp_count + kSegmentUnits - 1) / kSegmentUnits;
  // [2 round parities][8 n-tiles][segments][M rows x 4 lanes] float2
  auto* sums = reinterpret_cast<float2*>(xs + M * row_words);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int bias_offset = sh.scale_area / 2;  // Affine: biases in the second half of a slot's area
  if (threadIdx.x < kTileIdSlots) ids[threadIdx.x] = ~uint64_t{0};  // a tag no post has
  start_ring(full, empty, slots);

  if (warp == kStreamConsumerWarps) {  // producer: weights are constant, streamed before the wait
    if (lane != 0) return;
    const uint64_t policy = l2_evict_first_policy();
    int u = 0;
    produce_stream_tiles(schedule, sh.n_tiles, ids, [&](int j, int tile) {
      for (int ui = 0; ui < upt; ++ui, ++u) {
        const int slot = u % slots;
        if (u >= slots) mbar_wait(&empty[slot], ((u / slots) - 1) & 1);
        if (ui == 0) post_tile(ids, j, tile);  // before the arrive that releases the unit
        // QuantMatrix's stream_unit_* geometry (quant_layout.h), in 32-bit arithmetic.
        const int vectors = min(kChunkVectors, sh.vectors_per_tile - ui * kChunkVectors);
        const uint32_t code_bytes = static_cast<uint32_t>(vectors * 512);
        uint32_t scale_bytes = 0;
        int64_t scale_offset = 0;
        if constexpr (kGrouped) {
          scale_bytes = static_cast<uint32_t>(min(sh.group_span, sh.groups - ui * sh.group_span) * 8 * sh.scale_bytes);
          scale_offset = (static_cast<int64_t>(tile) * sh.groups + ui * sh.group_span) * 8 * sh.scale_bytes;
        }
        mbar_arrive_expect_tx(&full[slot], code_bytes + (kAffine ? 2 : 1) * scale_bytes);
        bulk_load(ring + slot * (kStreamUnitBytes / 16),
                  static_cast<const uint4*>(w.codes) +
                      (static_cast<int64_t>(tile) * sh.vectors_per_tile + ui * kChunkVectors) * 32,
                  code_bytes, &full[slot], policy);
        if constexpr (kGrouped) {
          unsigned char* area = scale_areas + static_cast<size_t>(slot) * sh.scale_area;
          bulk_load(area, static_cast<const unsigned char*>(w.scales) + scale_offset, scale_bytes, &full[slot]);
          if constexpr (kAffine)
            bulk_load(area + bias_offset, static_cast<const unsigned char*>(w.biases) + scale_offset, scale_bytes,
                      &full[slot]);
        }
      }
    });
    return;
  }

  pdl_wait();
  stage_rows(x, M, sh.K, xs, row_words, pair_count);
  constexpr int kConsumerThreads = kStreamConsumerWarps * 32;
  named_barrier_sync<kConsumerThreads>(1);  // consumers only
  cta_timeline_mark(kTimelineStaged);

  const int g = lane / 4, c = lane % 4;
  const uint32_t* x_lane = xs + g * row_words + c;  // A rows g (< M); rows 8-15 are zero
  const int group_shift = __ffsll(static_cast<int>(w.group)) - 1;
  const bool small_groups = w.group < 32;  // a 32-column unit's halves in different groups
  const int round_units = kStreamConsumerWarps * upt;
  for (int round = 0;; ++round) {
    const int first = round * kStreamConsumerWarps;  // the round's first n-tile (the CTA's j)
    float2* round_sums = sums + (round & 1) * kStreamConsumerWarps * num_segments * M * 4;
    for (int i = warp; i < round_units; i += kStreamConsumerWarps) {
      if (posted_tile(ids, first + i / upt) < 0) break;  // posts come in order: the n-tiles end at the first -1
      const int u = round * round_units + i, slot = u % slots, ui = i % upt;
      const int vectors = min(kChunkVectors, sh.vectors_per_tile - ui * kChunkVectors);
      mbar_wait(&full[slot], (u / slots) & 1);
      uint4 v[kChunkVectors];
      const uint4* unit = ring + slot * (kStreamUnitBytes / 16);
#pragma unroll
      for (int p = 0; p < kChunkVectors; ++p) v[p] = p < vectors ? unit[p * 32 + lane] : make_uint4(0, 0, 0, 0);
      const unsigned char* area = scale_areas + static_cast<size_t>(slot) * sh.scale_area;
      float2* tile_sums = round_sums + (i / upt) * num_segments * M * 4;
      // 32-column unit k of the ring unit's segment sg: its B fragment, then its two k-tiles' MMAs.
      const auto step = [&](int sg, int k, float(&acc)[4]) {
        const int cu = sg * kSegmentUnits + k;  // the 32-column unit within the ring unit
        const int unit_index = (ui * kUnitSegments + sg) * kSegmentUnits + k;
        const uint4 vu = v[cu / kUnitsPerVector];
        const uint32_t words[4] = {vu.x, vu.y, vu.z, vu.w};
        // The unit's two 16-column halves' groups (one unless groups are 16 columns).
        const int q0 = (cu * 32) >> group_shift, q1 = small_groups ? (cu * 32 + 16) >> group_shift : q0;
        uint32_t breg[4];
        if constexpr (kPairs) {
          uint32_t pairs[2][2] = {{0u, 0u}, {0x80008000u, 0x80008000u}};  // [scale, bias][half]; no bias: −0
          const auto* bits = reinterpret_cast<const unsigned short*>(area);
#pragma unroll
          for (int a = 0; a < (kAffine ? 2 : 1); ++a) {
            const unsigned short* values = a == 0 ? bits : bits + bias_offset / 2;
            pairs[a][0] = bf16_pair_of(values[q0 * 8 + g]);
            pairs[a][1] = small_groups ? bf16_pair_of(values[q1 * 8 + g]) : pairs[a][0];
          }
          quant_pair_fragment<kKind>(words[cu % kUnitsPerVector], pairs[0], pairs[1], breg);
        } else {
          float s[2] = {1.f, 1.f}, b[2] = {0.f, 0.f};
          if constexpr (kGrouped) {
            s[0] = shared_quant_scale<kScale>(area, q0 * 8 + g);
            s[1] = small_groups ? shared_quant_scale<kScale>(area, q1 * 8 + g) : s[0];
            if constexpr (kAffine) {
              b[0] = shared_quant_scale<kScale>(area + bias_offset, q0 * 8 + g);
              b[1] = small_groups ? shared_quant_scale<kScale>(area + bias_offset, q1 * 8 + g) : b[0];
            }
          }
          quant_fragment<kKind>(words, cu % kUnitsPerVector, s, b, breg);
        }
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          const int kt = unit_index * 2 + t;
          uint32_t a[4] = {0u, 0u, 0u, 0u};
          if (g < M) a[0] = x_lane[8 * kt], a[2] = x_lane[8 * kt + 4];
          mma_bf16(acc, a, breg[2 * t], breg[2 * t + 1]);
        }
      };
      if ((ui + 1) * kUnitSegments * kSegmentUnits <= sh.kp_count) {
        // Every segment of the unit is whole: the segments' chains interleaved (32-column unit k of
        // each in turn), so kUnitSegments MMAs are in flight and nothing branches between steps;
        // each chain keeps its own order, so its sum has the bits of the chains run one by one.
        float acc[kUnitSegments][4];
#pragma unroll
        for (int sg = 0; sg < kUnitSegments; ++sg) acc[sg][0] = acc[sg][1] = acc[sg][2] = acc[sg][3] = 0.f;
#pragma unroll
        for (int k = 0; k < kSegmentUnits; ++k)
#pragma unroll
          for (int sg = 0; sg < kUnitSegments; ++sg) step(sg, k, acc[sg]);
        if (g < M)
#pragma unroll
          for (int sg = 0; sg < kUnitSegments; ++sg)
            tile_sums[(ui * kUnitSegments + sg) * M * 4 + lane] = make_float2(acc[sg][0], acc[sg][1]);
      } else {  // the row tile's last unit, partly past its columns: chain by chain, up to kp_count
#pragma unroll
        for (int sg = 0; sg < kUnitSegments; ++sg) {
          const int seg = ui * kUnitSegments + sg;
          if (seg >= num_segments) break;
          float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
          for (int k = 0; k < kSegmentUnits; ++k) {
            if (seg * kSegmentUnits + k >= sh.kp_count) break;
            step(sg, k, acc);
          }
          if (g < M) tile_sums[seg * M * 4 + lane] = make_float2(acc[0], acc[1]);
        }
      }
      __syncwarp();  // every lane's reads of the slot (codes and scales) are done
      if (lane == 0) mbar_arrive(&empty[slot]);
    }
    named_barrier_sync<kConsumerThreads>(1);
    // Every post of the round has been made: its n-tiles' units were taken, or the -1s that end
    // them were posted through the round's end.
    const int tile = posted_tile(ids, first + warp);
    if (tile >= 0)
      write_tile_totals(round_sums + warp * num_segments * M * 4, num_segments, M, tile, sh.N, bias, out,
                        kKind == kQuantInt8Rows ? w.row_scales : nullptr);
    if (posted_tile(ids, first + kStreamConsumerWarps - 1) < 0) break;  // the last round
  }
  cta_timeline_mark(kTimelineDone);
#endif
}

template <int kKind, int kScale, bool kPairs>
void launch_quant_stream(int grid, size_t smem, cudaStream_t stream, const float* x, const QuantMatrix& w,
                         const QuantStreamShape& sh, const float* bias, float* out, const TileSchedule& schedule) {
  static const bool configured = [] {
    TACHYON_CUDA_CHECK(cudaFuncSetAttribute(matmul_quant_stream_kernel<kKind, kScale, kPairs>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(kStreamSmemLimit)));
    return true;
  }();
  (void)configured;
  launch(matmul_quant_stream_kernel<kKind, kScale, kPairs>, static_cast<unsigned>(grid), kStreamThreads, smem, stream, x, w,
         sh, bias, out, schedule);
}

bool stream_enabled = true;  // set_quant_decode_stream

}  // namespace

bool quant_stream_takes(const QuantMatrix& w, int64_t rows) {
  if (!stream_enabled || !device_arch().hopper || rows < 1 || rows > kStreamMaxRows) return false;
  if (w.kind != kQuantInt8Rows) {
    // Whole groups per ring unit, and 16-byte aligned scale runs for the bulk copies.
    if (w.group > kMaxStreamGroup || w.group < 16) return false;
    if (reinterpret_cast<uintptr_t>(w.scales) % 16 != 0 || reinterpret_cast<uintptr_t>(w.biases) % 16 != 0)
      return false;
  }
  return reinterpret_cast<uintptr_t>(w.codes) % 16 == 0 && quant_stream_slots(rows, w) > 0;
}

void matmul_quant_stream(const float* x, int64_t rows, const QuantMatrix& w, const float* bias, float* out,
                         cudaStream_t stream) {
  if (!quant_stream_takes(w, rows)) fail_unsupported("streaming quantized matmul, rows", rows);
  QuantStreamShape sh;
  sh.M = static_cast<int>(rows), sh.K = static_cast<int>(w.cols), sh.N = static_cast<int>(w.rows);
  sh.kp_count = static_cast<int>(w.units_per_row_tile());
  sh.vectors_per_tile = static_cast<int>(w.vectors_per_tile());
  sh.units_per_tile = static_cast<int>(w.stream_units_per_tile());
  sh.groups = static_cast<int>(w.groups());
  sh.group_span = w.kind == kQuantInt8Rows ? 0 : static_cast<int>(w.stream_unit_columns() / w.group);
  sh.scale_bytes = w.scale_type == kScaleF32 ? 4 : 2;
  sh.scale_area = scale_area_bytes(w);
  sh.n_tiles = static_cast<int>(ceil_div(sh.N, 8));
  sh.slots = quant_stream_slots(rows, w);
  const int grid = std::min(device_arch().sms, sh.n_tiles);
  const TileSchedule schedule = tile_schedule(sh.n_tiles, grid, sh.units_per_tile, sh.slots, stream);
  const size_t smem = quant_stream_smem_bytes(rows, w, sh.slots);
  with_quant_kind(w.kind, [&](auto kind) {
    constexpr int kKind = decltype(kind)::value;
    const auto run = [&](auto scale) {
      launch_quant_stream<kKind, decltype(scale)::value, false>(grid, smem, stream, x, w, sh, bias, out, schedule);
    };
    // Fp8Block's scales are f32, Mxfp4's bf16 (quant_layout.h); Dense I8 has none.
    if constexpr (kKind == kQuantFp8 || kKind == kQuantInt8Rows) {
      if (kKind == kQuantFp8 && w.scale_type != kScaleF32) fail_unsupported("Fp8Block scale type", w.scale_type);
      run(std::integral_constant<int, kScaleF32>{});
    } else if constexpr (kKind == kQuantMxfp4) {
      if (w.scale_type != kScaleBf16) fail_unsupported("Mxfp4 scale type", w.scale_type);
      run(std::integral_constant<int, kScaleBf16>{});
    } else if (w.bf16_pairs && w.scale_type == kScaleBf16) {
      launch_quant_stream<kKind, kScaleBf16, kKind == kQuantAffine4 || kKind == kQuantSymmetric4>(
          grid, smem, stream, x, w, sh, bias, out, schedule);
    } else if (w.scale_type == kScaleF32) {
      run(std::integral_constant<int, kScaleF32>{});
    } else if (w.scale_type == kScaleF16) {
      run(std::integral_constant<int, kScaleF16>{});
    } else {
      run(std::integral_constant<int, kScaleBf16>{});
    }
  });
  TACHYON_CUDA_LAUNCH_CHECK();
}

void set_quant_decode_stream(bool on) { stream_enabled = on; }

}  // namespace tachyon::kernels::cuda
