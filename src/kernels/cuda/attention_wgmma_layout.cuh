// What the two wgmma query-tile attention kernels share: the CTA's pairs and the shared-memory
// layout of q, K and V^T (attention_wgmma.cu: one CTA-wide pipeline; attention_ring.cu: a producer
// warpgroup filling a two-slot ring), and the ring kernel's entry point.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/attention_chunk.cuh"

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
//  vstage (attention_wgmma.cu only) V rows as cp.async lands them, stride D + 16 (16 mod 32:
//         the transposing 16-byte loads of a warp, 8 rows x 64 bytes, take 4 wavefronts).
// attention_wgmma.cu: q, two K buffers, vstage, one vt (208 KB at D = 128). attention_ring.cu:
// q and two slots of (K, vt), no vstage (212.5 KB at D = 128; 106.5 KB at D = 64).
template <int D>
struct WgmmaLayout {
  static constexpr int kQL = kWgmmaPairs / 8 * 32;
  static constexpr int kKL = kChunkKeys / 8 * 32 + 16;
  static constexpr int kVS = 40;
  static constexpr int kVL = D / 8 * kVS + 4;
  static constexpr int kVR = D + 16;
  static constexpr int q_words = D / 4 * kQL;
  static constexpr int k_words = D / 4 * kKL;
  static constexpr int vstage_words = kChunkKeys * kVR;
  static constexpr int vt_words = kChunkKeys / 4 * kVL;
  static constexpr size_t bytes = static_cast<size_t>(q_words + 2 * k_words + vstage_words + vt_words) * 4;
  static constexpr int ring_slots = 2;
  static constexpr int slot_words = k_words + vt_words;  // one ring slot: K, then vt
  // The ring kernel's q, its slots, then its mbarriers (full and empty per slot).
  static constexpr size_t ring_bytes =
      static_cast<size_t>(q_words + ring_slots * slot_words) * 4 + 2 * ring_slots * sizeof(uint64_t);
};

// attention_wgmma's query tiles on the ring kernel (attention_ring.cu), head_dim 64 or 128: the
// same arguments and the same bits.
void attention_ring(const float* q, const DeviceAttentionMeta& meta, const QueryTile* tiles, int num_tiles,
                    const float* k_cache, const float* v_cache, const AttentionShape& shape, int heads_per_chunk,
                    float* out, cudaStream_t stream);

}  // namespace tachyon::kernels::cuda
