// The prefill matmul on Hopper's wgmma (sm_90a), the backend's fastest and largest kernel, with
// its launch (tile width by shape, clusters of two CTAs, tensor maps) and the fusions it carries
// (the gated MLP's epilogue, inputs already in core-matrix order). Longer than 500 lines: the
// kernel's producer/consumer protocol and the host code that sizes its ring, clusters and tensor
// maps must change together; the kernel alone is ~370 lines.
#include "kernels/cuda/matmul_wgmma.cuh"

#include "kernels/cuda/matmul_common.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace tachyon::kernels::cuda {
namespace {

// ---- wgmma (sm_90a): M > 64 when the weight has a core-matrix copy -------------------------
// The same canonical order as every kernel above (bench/results/wgmma-bits-probe-03f9424.md: a chain of
// wgmma.m64nNk16 gives the bits of the mma.sync.m16n8k16 chain), on Hopper's asynchronous
// warpgroup MMA: a CTA computes a tile of 128 rows x 128 or 192 columns (WgmmaTile), both operands
// from shared memory in core-matrix order (8 rows x 16 bytes, no swizzle; bench/cuda/
// wgmma_rate_probe.cu measured wgmma alone at the tensor peak in that layout): x converted to that
// order (to_core_rows_kernel), the weight from its copy (pack_core_weight). Warp-specialized:
// warpgroup 0 produces 64-k stages into a ring of slots, counted on each slot's `full` mbarrier:
// one thread issues two TMA tensor copies per stage (core_tensor_map: one box per operand) where
// the driver exports the encoder, else (128 columns) its 128 threads issue 16-byte cp.asyncs and
// arrive when theirs land. Warpgroups 1 and 2 consume, each 64 rows with one wgmma.m64n128k16 or
// m64n192k16 per k16 step, and release a
// slot on its `empty` mbarrier once the wgmmas that read it are done (one stage kept in flight).
// Each 512-k segment's chain starts afresh (scale-d 0); segment totals add in order. The tile
// goes out by tensor stores through its last ring slot where the output's rows are 16-byte aligned
// (store_tile_by_tma; H200, same call: prefill 4096 +8.5%, 512 +1%, docs/perf/cuda.md),
// else one 8-byte store per lane and row, or for the gated MLP's gate_up
// (store_gated_tile) as the down GEMM's activated bf16 input. Measured (docs/perf/cuda.md):
// the same tiles with the consumers issuing the copies and a CTA barrier per stage ran 19-27%
// slower than the cp.async producer, the tensor copies 2-4% faster than it, and one bulk copy per
// 1 KB run 1.6x slower.
constexpr int kWsThreads = 384;  // producer warpgroup + 2 consumer warpgroups
constexpr int kCoreStageUnits = 16 * (2 * kStageKt) * 8;  // uint4 per stage of x: 16 row-blocks x 8 k-blocks
// A tile of 128 rows x kCols output columns (128 or 192): per consumer thread kCols / 2
// accumulators and as many segment totals; per stage 16 KB of x and kCols / 8 row-blocks of the
// weight (16 or 24 KB); a ring of 6 or 5 slots (5 is as deep as 192 columns fit in 227 KB; 7 at 128
// measured no faster than 6, docs/perf/cuda.md).
// 192 columns: the consumers take 232 registers and the producer keeps 40 (setmaxnreg). Per tile
// the two widths run at the same rate (H200: gate_up at 4096 rows 1462-1486 us at 192 against
// 1479-1508 at 128); what the wider tile changes is how many tiles a launch has, which decides how
// many rounds the resident pairs take (docs/perf/cuda.md).
template <int kCols>
struct WgmmaTile {
  static_assert(kCols == 128 || kCols == 192);
  static constexpr int kColBlocks = kCols / 8;
  static constexpr int kStages = kCols == 128 ? 6 : 5;
  static constexpr int kWeightUnits = kColBlocks * (2 * kStageKt) * 8;  // uint4 per weight stage
  static constexpr size_t kSmem =
      kStages * static_cast<size_t>(kCoreStageUnits + kWeightUnits) * sizeof(uint4) + 2 * kStages * sizeof(uint64_t);
  static_assert(kSmem <= 227 * 1024, "the sm_90 limit of dynamic shared memory per CTA");
  static constexpr uint32_t kProducerRegs = 40, kConsumerRegs = 232;
  static_assert(kProducerRegs * 128 + kConsumerRegs * 256 <= 65536 / kWsThreads / 8 * 8 * kWsThreads);
};

// x [M, K] f32 -> bf16 [m_pad, k_pad] in the core-matrix order of pack_core_weight (zero-padded):
// a stage's 8 k-blocks of a row-block are 1 KB of contiguous memory. 8 values per thread.
__global__ void to_core_rows_kernel(MatmulInput in, int M, int K, int64_t m_pad, int64_t k_pad,
                                    uint4* __restrict__ xb) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m_pad * k_pad / 8) return;
  const int64_t kb_count = k_pad / 8, core = i / 8, r = (core / kb_count) * 8 + i % 8, k0 = (core % kb_count) * 8;
  uint32_t v[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) v[j] = load_input_pair(in, M, K, static_cast<int>(r), static_cast<int>(k0 + 2 * j));
  xb[i] = make_uint4(v[0], v[1], v[2], v[3]);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void cp_async_arrive(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
#endif

// The epilogue by tensor stores: a consumer warpgroup's 64 rows x kCols columns of the tile go out
// as boxes of 64 x 32 floats (out_tensor_map) through `stage`, 16 KB of the tile's last ring slot
// (the slot is released once the stores have read it), two 8 KB buffers in turn: the warpgroup
// writes a box with the map's 128-byte swizzle (16-byte chunk j of row r at chunk j ^ (r % 8):
// a warp's 8-byte stores take the two wavefronts their 256 bytes need), then its first thread
// issues the store and the warpgroup goes on. Against one 8-byte global store per lane and row
// (64 or 96 instructions per thread, docs/perf/cuda.md), the stores drain while the
// next tile's wgmmas run; columns past N and rows past M are clipped by the copy. `barrier`: this
// warpgroup's named barrier.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
template <int kCols>
__device__ __forceinline__ void store_tile_by_tma(const float (&total)[kCols / 2], const float* __restrict__ bias, int N,
                                                  int M, int64_t row0, int col0, const CUtensorMap& out_map,
                                                  void* stage, uint32_t barrier) {
  const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4, cwarp = (threadIdx.x / 32) % 4;
  const bool issuer = threadIdx.x % 128 == 0;
#pragma unroll
  for (int bx = 0; bx < kCols / 32; ++bx) {
    auto* buf = static_cast<uint8_t*>(stage) + (bx % 2) * 8192;
    if (bx >= 2) {  // the store of box bx - 2 has read this buffer
      if (issuer) bulk_wait_read<1>();
      named_barrier_sync<128>(barrier);
    }
#pragma unroll
    for (int nbl = 0; nbl < 4; ++nbl)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = 16 * cwarp + g + 8 * h, nb = 4 * bx + nbl, col = col0 + 8 * nb + 2 * c;
        const int chunk = (2 * nbl + c / 2) ^ (r % 8);
        const float v0 = col < N ? finish(total[4 * nb + 2 * h], bias, col) : 0.f;
        const float v1 = col + 1 < N ? finish(total[4 * nb + 2 * h + 1], bias, col + 1) : 0.f;
        *reinterpret_cast<float2*>(buf + r * 128 + chunk * 16 + 8 * (c % 2)) = make_float2(v0, v1);
      }
    fence_proxy_async();  // the generic-proxy writes, before the tensor copy reads them
    named_barrier_sync<128>(barrier);
    if (issuer) {  // a group per box, empty where it lies past n or M: the waits above count boxes
      if (col0 + 32 * bx < N && row0 < M) tensor_store_2d(&out_map, buf, col0 + 32 * bx, static_cast<int>(row0));
      bulk_commit();
    }
  }
  if (issuer) bulk_wait_read<0>();
  named_barrier_sync<128>(barrier);  // every store has read the slot: it may be refilled
}
#endif

// The gated MLP's gate_up GEMM (gated_mlp): a tile's columns are `h = kCols / 2` gate rows of the
// fused weight and the same h up rows (inter further on), and its epilogue writes act(gate) · up
// straight into the down projection's input: bf16 in core-matrix order (to_core_rows_kernel's
// layout and rounding, from load_input_pair's arithmetic: the same bits as the fp32 gate_up, the
// activation and the conversion), zeros in rows [M, m_pad). xb null: an ordinary GEMM.
// No padding bytes: kernel parameters are compared bytewise as graph keys (step_graph.h).
struct GatedOutput {
  uint32_t* xb = nullptr;  // [m_pad / 8][kb_count][8 rows][4 bf16 pairs]
  int32_t inter = 0;       // the activation's columns (gate_up has 2 · inter rows); a multiple of 64
  int32_t kb_count = 0;    // inter / 8
  int32_t m_pad = 0;       // rows of xb
  int32_t gelu = 0;        // GeluTanh, else SiLU
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// A consumer warpgroup's 64 rows (from row0) of activation columns [j0, j0 + kCols / 2): each lane
// holds gate column j in total[4 nb + 2 h + e] and its up column in the same slot kCols / 16
// blocks on; a warp's store writes one core matrix row-block's 128 bytes.
template <int kCols>
__device__ __forceinline__ void store_gated_tile(const float (&total)[kCols / 2], int M, int64_t row0, int j0,
                                                 const GatedOutput& o) {
  constexpr int kHalfBlocks = kCols / 16;
  const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4, cwarp = (threadIdx.x / 32) % 4;
#pragma unroll
  for (int nb = 0; nb < kHalfBlocks; ++nb)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = row0 + 16 * cwarp + g + 8 * h;
      const int j = j0 + 8 * nb + 2 * c;
      if (row >= o.m_pad || j >= o.inter) continue;
      const int gi = 4 * nb + 2 * h, ui = 4 * (nb + kHalfBlocks) + 2 * h;
      const uint32_t v = row < M ? pack_bf16x2(gated(total[gi], total[ui], o.gelu), gated(total[gi + 1], total[ui + 1], o.gelu))
                                 : 0u;
      o.xb[core_row_index(row, j / 8, o.kb_count) * 4 + c] = v;
    }
}
#endif

// kTma, the producer: one thread's two tensor copies per stage, or 128 threads' cp.asyncs.
// kPair (with kTma): clusters of two CTAs, row blocks 2i and 2i + 1 of one column block, share the
// weight's stages: each CTA's producer loads half of the stage's weight rows and multicasts them
// into both CTAs (x as before, its own), so the pair reads the weight from L2 once instead of twice:
// a quarter less L2 traffic per stage. A slot is free once the consumers of both CTAs released it:
// each consumer warp arrives on its own CTA's `empty` and on the other's, 16 arrivals per phase.
// Same wgmmas on the same bytes: the same bits. H200, same call: prefill 512 +2.9%,
// 4096 +2.0% against one CTA per tile. kPair is false only for the cp.async producer.
template <bool kTma, bool kPair, int kCols>
__global__ void __launch_bounds__(kWsThreads, 1) matmul_wgmma_kernel(const uint4* __restrict__ xb, int M, int k_tiles,
                                                                     const uint4* __restrict__ wc, int N,
                                                                     const float* __restrict__ bias,
                                                                     float* __restrict__ out, int row_pairs,
                                                                     int num_pair_tiles,
                                                                     const __grid_constant__ CUtensorMap x_map,
                                                                     const __grid_constant__ CUtensorMap w_map,
                                                                     const __grid_constant__ CUtensorMap out_map,
                                                                     int store_by_tma, GatedOutput gated_out) {
  static_assert(kTma || !kPair, "the pair multicasts tensor copies");
  static_assert(kTma || kCols == 128, "the cp.async producer copies 128-column stages");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tile = WgmmaTile<kCols>;
  constexpr int kWsStages = Tile::kStages, kColBlocks = Tile::kColBlocks, kWeightUnits = Tile::kWeightUnits;
  extern __shared__ __align__(1024) uint4 smem[];  // 1 KB: the output boxes' 128-byte swizzle
  uint4* As = smem;                                // [kWsStages][16 row-blocks][8 k-blocks][8] (core matrices)
  uint4* Bs = smem + kWsStages * kCoreStageUnits;  // [kWsStages][kColBlocks blocks of 8 output columns][8][8]
  auto* full = reinterpret_cast<uint64_t*>(Bs + kWsStages * kWeightUnits);  // [kWsStages]: stage landed
  uint64_t* empty = full + kWsStages;                                       // [kWsStages]: stage consumed
  // The warpgroup index through a shuffle: provably uniform per warp, so ptxas does not treat the
  // consumers' wgmmas as divergent code (it serialises them there, C7518).
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, wg = __shfl_sync(0xffffffffu, tid / 128, 0);
  // The tiles this CTA computes: its own (row block blockIdx.x, column block blockIdx.y), or with
  // kPair, persistent: cluster c of C walks pair-tiles c, c + C, ... (row-block pairs fastest),
  // taking row block 2 (p % row_pairs) + rank of column block p / row_pairs.
  const int walk_first = kPair ? static_cast<int>(blockIdx.x / 2) : 0;
  const int walk_step = kPair ? static_cast<int>(gridDim.x / 2) : 1, walk_end = kPair ? num_pair_tiles : 1;
  const auto tile_rows = [&](int t) {
    return kPair ? static_cast<int64_t>(2 * (t % row_pairs) + static_cast<int>(blockIdx.x % 2)) * 128
                 : static_cast<int64_t>(blockIdx.x) * 128;
  };
  // A gated tile's weight rows: kColBlocks / 2 row-blocks of gate from tile_columns(t), as many of up
  // inter / 8 blocks on (each CTA of a pair loads one of the two halves).
  const bool gated = gated_out.xb != nullptr;
  const int tile_blocks = gated ? kColBlocks / 2 : kColBlocks;
  const int half_offset = gated ? gated_out.kb_count : kColBlocks / 2;
  const auto tile_columns = [&](int t) {
    return kPair ? static_cast<int64_t>(t / row_pairs) * tile_blocks : static_cast<int64_t>(blockIdx.y) * tile_blocks;
  };
  const int64_t kb_count = 2 * static_cast<int64_t>(k_tiles);  // k-blocks of 8: x rows are kb_count uint4 long
  const int num_stages = k_tiles / kStageKt;
  if (tid == 0) {
    for (int s = 0; s < kWsStages; ++s) mbar_init(&full[s], kTma ? 1 : 128), mbar_init(&empty[s], kPair ? 16 : 8);
    fence_mbarrier_init();
  }
  if constexpr (kPair) cluster_sync();
  else __syncthreads();
  pdl_launch_dependents();
  const uint32_t rank = kPair ? cluster_rank() : 0u, peer = rank ^ 1u;

  // `it` counts the CTA's stages over all its tiles: stage it is slot it % kWsStages, in the
  // slot's phase it / kWsStages.
  if (wg == 0) {
    if constexpr (kCols != 128) setmaxnreg_dec<Tile::kProducerRegs>();
    if constexpr (kTma) {
      if (tid != 0) return;
      const auto wait_empty = [&](int it) {
        const int slot = it % kWsStages;
        mbar_wait(&empty[slot], ((it / kWsStages) - 1) & 1);
      };
      // Stage ks's weight rows of column block nb0 into `slot` (with kPair this CTA's half, multicast).
      const auto load_weight = [&](int slot, int ks, int64_t nb0) {
        if constexpr (kPair) {
          const int half = static_cast<int>(rank);  // this CTA's half of the row-blocks
          tensor_load_3d_multicast(Bs + slot * kWeightUnits + half * kWeightUnits / 2, &w_map, 0, ks * 8,
                                   static_cast<int>(nb0) + half_offset * half, &full[slot], 0b11);
        } else {
          tensor_load_3d(Bs + slot * kWeightUnits, &w_map, 0, ks * 8, static_cast<int>(nb0), &full[slot]);
        }
      };
      // The whole stage lands in this CTA either way (with kPair half the weight's from the other
      // CTA); boxes past the weight's last row-block land as zeros and count all their bytes.
      constexpr uint32_t kStageBytes = (kCoreStageUnits + kWeightUnits) * sizeof(uint4);
      // The first tile's first ring of weight stages goes out before the programmatic wait (weights
      // are constant: pdl_wait's rule), so it streams while the previous kernel ends; x follows
      // the wait. A CTA resides early only where the previous kernel's CTAs have left its SM (it
      // takes a whole SM's registers). H200, four alternating rounds in one call: prefill 512 tokens
      // +0.7%, 4096 flat (docs/perf/cuda.md).
      const int early = walk_first < walk_end ? min(kWsStages, num_stages) : 0;
      for (int ks = 0; ks < early; ++ks) {
        mbar_arrive_expect_tx(&full[ks], kStageBytes);
        load_weight(ks, ks, tile_columns(walk_first));
      }
      pdl_wait();  // x comes from the previous kernel
      int it = 0;
      for (int t = walk_first; t < walk_end; t += walk_step) {
        const int64_t row0 = tile_rows(t), nb0 = tile_columns(t);
        for (int ks = 0; ks < num_stages; ++ks, ++it) {
          const int slot = it % kWsStages;
          if (it >= early) {
            if (it >= kWsStages) wait_empty(it);
            mbar_arrive_expect_tx(&full[slot], kStageBytes);
            load_weight(slot, ks, nb0);
          }
          tensor_load_3d(As + slot * kCoreStageUnits, &x_map, 0, ks * 8, static_cast<int>(row0 / 8), &full[slot]);
        }
      }
      // kPair: the other CTA's consumers arrive on this CTA's barriers (and its producer writes
      // into this CTA's slots) until both have released every stage; this CTA may exit only then.
      if constexpr (kPair)
        for (const int last = it; it < last + kWsStages; ++it)
          if (it >= kWsStages) wait_empty(it);
    } else {
      pdl_wait();  // x comes from the previous kernel
      const int64_t row0 = tile_rows(0), nb0 = tile_columns(0);
      for (int ks = 0; ks < num_stages; ++ks) {
        const int slot = ks % kWsStages;
        if (ks >= kWsStages) mbar_wait(&empty[slot], ((ks / kWsStages) - 1) & 1);
#pragma unroll
        for (int i = 0; i < kCoreStageUnits / 128; ++i) {
          const int c = tid + 128 * i, blk = c / 64, rem = c % 64;  // 64 uint4: a row-block's 8 k-blocks
          cp_async16(As + slot * kCoreStageUnits + c, xb + ((row0 / 8 + blk) * kb_count + ks * 8) * 8 + rem);
          cp_async16(Bs + slot * kCoreStageUnits + c, wc + ((nb0 + blk) * kb_count + ks * 8) * 8 + rem);
        }
        cp_async_arrive(&full[slot]);
      }
      cp_async_wait<0>();
    }
    return;
  }

  if constexpr (kCols != 128) setmaxnreg_inc<Tile::kConsumerRegs>();
  const int cw = wg - 1, cwarp = warp - 4;  // consumer warpgroup: rows [64 cw, 64 cw + 64) of the tile
  const int g = lane / 4, c = lane % 4;
  const auto release = [&](int slot) {
    mbar_arrive(&empty[slot]);
    if constexpr (kPair) mbar_arrive_remote(&empty[slot], peer);
  };
  int it = 0;
  for (int t = walk_first; t < walk_end; t += walk_step) {
    const int64_t row0 = tile_rows(t), nb0 = tile_columns(t);
    float acc[kCols / 2], total[kCols / 2];
#pragma unroll
    for (int i = 0; i < kCols / 2; ++i) acc[i] = total[i] = 0.f;
    int pending = -1;  // a stage whose wgmmas may still be in flight, its slot not yet released
    for (int ks = 0; ks < num_stages; ++ks, ++it) {
      const int slot = it % kWsStages;
      mbar_wait(&full[slot], (it / kWsStages) & 1);
      // cp.async bytes (generic proxy), read by wgmma (async proxy); tensor copies need no fence
      if constexpr (!kTma) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      const uint4* a_s = As + slot * kCoreStageUnits + cw * 8 * 64;  // this warpgroup's 8 row-blocks
      const uint4* b_s = Bs + slot * kWeightUnits;
      asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
      for (int kt = 0; kt < kStageKt; ++kt) {  // k-blocks 2 kt, 2 kt + 1: 128 B apart; row-blocks 1 KB apart
        const uint64_t a = core_descriptor(a_s + kt * 16, 128, 1024), b = core_descriptor(b_s + kt * 16, 128, 1024);
        // A segment's chain starts from d = A · B (scale-d 0) instead of zeroed accumulators: the
        // segment drain loses its kCols / 2 register clears per thread (H200, same call: prefill
        // +1.5% at 512 and 4096 tokens, docs/perf/cuda.md). Same bits: each total
        // starts +0 and adds the segment's sums, so a sum's zero sign cannot reach it.
        const int accumulate = kt > 0 || ks % kStagesPerSegment != 0;
        if constexpr (kCols == 128) wgmma_m64n128k16(acc, a, b, accumulate);
        else wgmma_m64n192k16(acc, a, b, accumulate);
      }
      asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
      if ((ks + 1) % kStagesPerSegment == 0 || ks + 1 == num_stages) {
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        if (lane == 0) {
          if (pending >= 0) release(pending % kWsStages);
          if (!store_by_tma || ks + 1 < num_stages) release(slot);  // else the tile's output passes through it
        }
        pending = -1;
#pragma unroll
        for (int i = 0; i < kCols / 2; ++i) total[i] += acc[i];
      } else {
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");  // this stage stays in flight
        if (lane == 0 && pending >= 0) release(pending % kWsStages);
        pending = it;
      }
    }
    if (gated) {
      store_gated_tile<kCols>(total, M, row0 + 64 * cw, static_cast<int>(nb0 * 8), gated_out);
      continue;
    }
    if (store_by_tma) {
      // Warpgroup 1 stages its boxes in the slot's weight part, which warpgroup 0's last wgmmas
      // read, and warpgroup 0 in the x part, half of which warpgroup 1's read: both must be done.
      named_barrier_sync<256>(3);
      store_tile_by_tma<kCols>(total, bias, N, M, row0 + 64 * cw, static_cast<int>(nb0 * 8), out_map,
                               cw == 0 ? static_cast<void*>(As + (it - 1) % kWsStages * kCoreStageUnits)
                                       : static_cast<void*>(Bs + (it - 1) % kWsStages * kWeightUnits),
                               1 + cw);
      if (lane == 0) release((it - 1) % kWsStages);
      continue;
    }
    // A lane's two adjacent columns of a row as one 8-byte store where every row starts 8-byte
    // aligned (N even, out aligned): 32 contiguous bytes per row and instruction, half the store
    // instructions of one float at a time.
    const bool pairs_out = N % 2 == 0 && reinterpret_cast<uintptr_t>(out) % 8 == 0;
#pragma unroll
    for (int nb = 0; nb < kColBlocks; ++nb)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t row = row0 + 16 * cwarp + g + 8 * h;
        const int col = static_cast<int>((nb0 + nb) * 8) + 2 * c;
        if (row >= M || col >= N) continue;
        const float v0 = finish(total[4 * nb + 2 * h], bias, col);
        if (pairs_out) {
          *reinterpret_cast<float2*>(out + row * N + col) = make_float2(v0, finish(total[4 * nb + 2 * h + 1], bias, col + 1));
        } else {
          out[row * N + col] = v0;
          if (col + 1 < N) out[row * N + col + 1] = finish(total[4 * nb + 2 * h + 1], bias, col + 1);
        }
      }
  }
  if (store_by_tma && tid % 128 == 0) bulk_wait<0>();  // this warpgroup's output written
#else
  __trap();  // built for sm_90 without the arch-specific features: never launched (matmul checks)
#endif
}

// A core-order matrix's 3-D tensor map (encode_core_tensor_map): one box of 16 row-blocks is a
// stage of x or of a 128-column weight (box_blocks: the weight's row-blocks per stage, half for a pair).
CUtensorMap core_tensor_map(const void* base, int64_t rows, int64_t kb_count, uint32_t box_blocks = 16) {
  CUtensorMap map{};
  const CUresult result = encode_core_tensor_map(&map, base, rows, kb_count, box_blocks);
  if (result != CUDA_SUCCESS) fail_unsupported("wgmma tensor map (cuTensorMapEncodeTiled result)", result);
  return map;
}

// The wgmma kernels' output [M, N] f32 as a 2-D tensor for their tensor stores (store_tile_by_tma):
// boxes of 64 rows x 32 columns (128 bytes: the 128-byte swizzle's row). Rows must start 16-byte
// aligned (N % 4 == 0, out aligned); `usable` says whether they do (else the map stays empty).
struct OutputTensorMap {
  CUtensorMap map{};
  bool usable = false;
};
OutputTensorMap output_tensor_map(float* out, int M, int N) {
  OutputTensorMap result;
  if (N % 4 != 0 || reinterpret_cast<uintptr_t>(out) % 16 != 0) return result;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(N), static_cast<cuuint64_t>(M)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(N) * sizeof(float)};
  const cuuint32_t box[2] = {32, 64}, element_strides[2] = {1, 1};
  const CUresult status = tensor_map_encoder()(&result.map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, out, dims, strides, box,
                                               element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                               CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS) fail_unsupported("wgmma output tensor map (cuTensorMapEncodeTiled result)", status);
  result.usable = true;
  return result;
}

// The shared-memory limit of the wgmma kernels of one width (at 128 the cp.async producer's
// too), raised once (before any launch or occupancy query).
template <int kCols>
void configure_wgmma() {
  static const bool configured = [] {
    const auto raise = [](auto kernel) {
      TACHYON_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(WgmmaTile<kCols>::kSmem)));
    };
    raise(matmul_wgmma_kernel<true, false, kCols>);
    raise(matmul_wgmma_kernel<true, true, kCols>);
    if constexpr (kCols == 128) raise(matmul_wgmma_kernel<false, false, 128>);
    return true;
  }();
  (void)configured;
}

// Clusters of two wgmma CTAs (kPair) that fit on the device at once: the persistent grid.
template <int kCols>
int resident_wgmma_pairs() {
  static const int pairs = [] {
    configure_wgmma<kCols>();
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(2);
    config.blockDim = dim3(kWsThreads);
    config.dynamicSmemBytes = WgmmaTile<kCols>::kSmem;
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = 2, cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
    config.attrs = &cluster;
    config.numAttrs = 1;
    int clusters = 0;
    TACHYON_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, matmul_wgmma_kernel<true, true, kCols>, &config));
    return std::max(clusters, 1);
  }();
  return pairs;
}

// Pair-tiles of 128 rows x kCols columns per resident pair, rounded up: the rounds a persistent
// launch of that width takes.
template <int kCols>
int64_t wgmma_rounds(unsigned row_blocks, int64_t n) {
  return ceil_div(ceil_div(row_blocks, 2) * ceil_div(round_up(n, kMmaRowPad), kCols), resident_wgmma_pairs<kCols>());
}

// The wgmma tile width (set_wgmma_columns; 0: by shape). By shape: 192 columns where their rounds
// cover no more columns than 128's, a 192-column tile's columns counted at wgmma_wide_cost. qkv at
// 512 rows (6144 columns): 64 pair-tiles of 192 in one round against 96 of 128 in two, 44 against
// 57 us; a 4096-wide o or down projection keeps 128 (22 column tiles of 192 leave a third of the
// pairs idle, 32 of 128 fill them: o at 512 rows 42 us at 192, 33 at 128).
int wgmma_columns_setting = 0;

// A 192-column tile's time per column against a 128-column tile's: H200, one process, gate_up at
// 4096 rows 1382 / 1410 us at 192 against 1425 / 1456 at 128, where 192 takes 32 rounds of the
// resident pairs and 128 takes 47; counted at 0.95, prefill 4096 +2.5% against 1.0
// (docs/perf/cuda.md).
constexpr double wgmma_wide_cost = 0.95;

int wgmma_columns(unsigned row_blocks, int64_t n) {
  if (wgmma_columns_setting == 128 || wgmma_columns_setting == 192) return wgmma_columns_setting;
  const double wide = static_cast<double>(wgmma_rounds<192>(row_blocks, n) * 192) * wgmma_wide_cost;
  return wide <= static_cast<double>(wgmma_rounds<128>(row_blocks, n) * 128) ? 192 : 128;
}

// The epilogue by tensor stores where the output's rows allow it (set_wgmma_tma_store(false), tests:
// one 8-byte global store per lane and row).
bool wgmma_tma_store = true;

// gated.xb set (gated_mlp; pairs only): the tiles cover gated.inter activation columns, kCols / 2
// per tile, and write the down projection's input instead of `out`.
template <int kCols>
void launch_wgmma(const uint4* xa, int M, int k_tiles, const void* w_core, int64_t n, const float* bias, float* out,
                  unsigned row_blocks, cudaStream_t stream, const GatedOutput& gated = {}) {
  configure_wgmma<kCols>();
  const int N = static_cast<int>(n);
  const int64_t kb_count = 2 * static_cast<int64_t>(k_tiles), n_pad = round_up(n, kMmaRowPad);
  const int64_t m_pad = static_cast<int64_t>(row_blocks) * 128;
  const unsigned col_tiles =
      static_cast<unsigned>(gated.xb ? ceil_div(int64_t{gated.inter}, kCols / 2) : ceil_div(n_pad, kCols));
  constexpr uint32_t kBoxBlocks = WgmmaTile<kCols>::kColBlocks;
  const OutputTensorMap out_map = wgmma_tma_store && !gated.xb ? output_tensor_map(out, M, N) : OutputTensorMap{};
  const int store_by_tma = out_map.usable ? 1 : 0;
  const int row_pairs = static_cast<int>(ceil_div(row_blocks, 2));
  const int pair_tiles = row_pairs * static_cast<int>(col_tiles);
  const unsigned clusters = static_cast<unsigned>(std::min(pair_tiles, resident_wgmma_pairs<kCols>()));
  launch_clustered(matmul_wgmma_kernel<true, true, kCols>, dim3(2 * clusters), kWsThreads, WgmmaTile<kCols>::kSmem,
                   stream, 2u, xa, M, k_tiles, static_cast<const uint4*>(w_core), N, bias, out, row_pairs,
                   pair_tiles, core_tensor_map(xa, m_pad, kb_count),
                   core_tensor_map(w_core, n_pad, kb_count, kBoxBlocks / 2), out_map.map, store_by_tma, gated);
}

// The TMA producer where the driver exports the tensor-map encoder (+4% / +2% at prefill 512 /
// 4096 against the cp.async producer, docs/perf/cuda.md), else the cp.async producer.
bool wgmma_by_tma() {
  static const bool tma = tensor_map_encoder() != nullptr;
  return tma;
}

// The wgmma kernel on x already in core-matrix order (xa: the row-blocks of M rows, k_tiles · 16
// columns), at the tile width chosen by shape; `gated` as in launch_wgmma.
void launch_wgmma_on_core(const uint4* xa, int M, int k_tiles, const void* w_core, int64_t n, const float* bias,
                          float* out, cudaStream_t stream, const GatedOutput& gated = {}) {
  const unsigned row_blocks = static_cast<unsigned>(a_fragment_m_tiles(M) / kTileM);
  if (!wgmma_by_tma()) {
    configure_wgmma<128>();
    launch(matmul_wgmma_kernel<false, false, 128>, dim3(row_blocks, static_cast<unsigned>(round_up(n, kMmaRowPad) / 128)),
           kWsThreads, WgmmaTile<128>::kSmem, stream, xa, M, k_tiles, static_cast<const uint4*>(w_core),
           static_cast<int>(n), bias, out, 0, 0, CUtensorMap{}, CUtensorMap{}, CUtensorMap{}, 0, GatedOutput{});
  } else if (wgmma_columns(row_blocks, n) == 192) {
    launch_wgmma<192>(xa, M, k_tiles, w_core, n, bias, out, row_blocks, stream, gated);
  } else {
    launch_wgmma<128>(xa, M, k_tiles, w_core, n, bias, out, row_blocks, stream, gated);
  }
}

// x [M, K] (or gated_activation's output, `in`) -> xa: bf16 core matrices of the wgmma kernel's
// padded rows (a_fragment_m_tiles) and k_pad columns, zero past M and K.
void to_core_rows(const MatmulInput& in, int M, int K, int64_t k_pad, uint4* xa, cudaStream_t stream) {
  const int64_t m_pad = a_fragment_m_tiles(M) * 16;
  launch(to_core_rows_kernel, static_cast<unsigned>(ceil_div(m_pad * k_pad / 8, 256)), 256, 0, stream, in, M, K, m_pad,
         k_pad, xa);
}

}  // namespace

// The same bytes as x's A fragments.
void matmul_wgmma(const MatmulInput& in, int M, int K, int k_tiles, const void* w_core, int64_t n, const float* bias,
                  float* out, void* workspace, cudaStream_t stream) {
  auto* xa = static_cast<uint4*>(workspace);
  to_core_rows(in, M, K, static_cast<int64_t>(k_tiles) * 16, xa, stream);
  launch_wgmma_on_core(xa, M, k_tiles, w_core, n, bias, out, stream);
}

void set_wgmma_columns(int cols) { wgmma_columns_setting = cols; }
void set_wgmma_tma_store(bool on) { wgmma_tma_store = on; }

int wgmma_columns_for(int64_t rows, int64_t n) {
  return wgmma_columns(static_cast<unsigned>(a_fragment_m_tiles(rows) / kTileM), n);
}

// Not at decode: staging the activation in the streaming kernel measured 42.7 us for the 8B down
// projection against 31.0 + 4.4 us for the two launches, and batch-1 decode 187 against 206 tok/s
// (docs/perf/cuda.md: the activation kernel's launch is hidden while the matmul fills its
// ring; the fused kernel's staging is not).
bool matmul_gated_fuses(int64_t rows, int64_t n, int64_t k, bool has_core) { return rows > 64 && has_core; }

void matmul_gated(const float* gate_up, bool gelu, int64_t rows, const void* w_core, int64_t n, int64_t k,
                  const float* bias, float* out, void* workspace, cudaStream_t stream) {
  const MatmulInput in{nullptr, gate_up, gelu ? 1 : 0};
  const int M = static_cast<int>(rows), K = static_cast<int>(k);
  const int k_tiles = static_cast<int>(round_up(k, kMmaColPad) / 16);
  if (!matmul_gated_fuses(rows, n, k, w_core != nullptr)) fail_unsupported("matmul_gated rows (needs > 64)", rows);
  matmul_wgmma(in, M, K, k_tiles, w_core, n, bias, out, workspace, stream);
}

int64_t matmul_core_rows(int64_t rows) { return a_fragment_m_tiles(rows) * 16; }

bool matmul_takes_core_input(int64_t rows, int64_t k, bool has_core) { return rows > 64 && has_core && k % 64 == 0; }

void matmul_core_input(const void* xa, int64_t rows, int64_t k, const void* w_core, int64_t n, const float* bias,
                       float* out, cudaStream_t stream) {
  if (!matmul_takes_core_input(rows, k, w_core != nullptr)) fail_unsupported("matmul_core_input rows", rows);
  launch_wgmma_on_core(static_cast<const uint4*>(xa), static_cast<int>(rows), static_cast<int>(k / 16), w_core, n,
                       bias, out, stream);
}

bool gated_mlp_fuses(int64_t rows, int64_t inter, bool has_cores) {
  return rows > 64 && has_cores && inter % 64 == 0 && wgmma_by_tma();
}

size_t gated_mlp_workspace_bytes(int64_t rows, int64_t hidden, int64_t inter) {
  return static_cast<size_t>(matmul_core_rows(rows) * (round_up(hidden, kMmaColPad) + inter)) * 2;
}

void gated_mlp(const float* x, bool gelu, int64_t rows, const void* gate_up_core, int64_t hidden, int64_t inter,
               const void* down_core, int64_t n, float* out, void* workspace, cudaStream_t stream) {
  const int64_t k_pad = round_up(hidden, kMmaColPad);
  to_core_rows(MatmulInput{x}, static_cast<int>(rows), static_cast<int>(hidden), k_pad, static_cast<uint4*>(workspace),
               stream);
  gated_mlp_core_input(workspace, gelu, rows, gate_up_core, k_pad, inter, down_core, n, out, stream);
}

void gated_mlp_core_input(void* workspace, bool gelu, int64_t rows, const void* gate_up_core, int64_t hidden,
                          int64_t inter, const void* down_core, int64_t n, float* out, cudaStream_t stream) {
  if (!gated_mlp_fuses(rows, inter, gate_up_core && down_core) || hidden % kMmaColPad != 0)
    fail_unsupported("gated_mlp rows", rows);
  const int M = static_cast<int>(rows);
  const int64_t m_pad = matmul_core_rows(rows);
  const auto* xa = static_cast<const uint4*>(workspace);
  uint4* xb = static_cast<uint4*>(workspace) + m_pad * hidden / 8;  // the down GEMM's input, written by the gate_up tiles
  GatedOutput gated;
  gated.xb = reinterpret_cast<uint32_t*>(xb);
  gated.inter = static_cast<int32_t>(inter), gated.kb_count = static_cast<int32_t>(inter / 8);
  gated.m_pad = static_cast<int32_t>(m_pad), gated.gelu = gelu ? 1 : 0;
  launch_wgmma_on_core(xa, M, static_cast<int>(hidden / 16), gate_up_core, 2 * inter, nullptr, nullptr, stream, gated);
  launch_wgmma_on_core(xb, M, static_cast<int>(inter / 16), down_core, n, nullptr, out, stream);
}

}  // namespace tachyon::kernels::cuda
