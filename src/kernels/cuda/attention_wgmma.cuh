// The query-tile attention kernel on Hopper's warpgroup MMA (sm_90a), for head_dim 64 and 128:
// the arithmetic of attention_chunk.cuh (the same chains of k8 steps, so the same bits as the
// mma.sync kernels: a wgmma chain gives the bits of the mma.sync chain, docs/perf/cuda.md), with
// each warpgroup computing 64 pairs' scores and p·v by a handful of wgmma instructions per chunk
// instead of 256 mma.sync per warp.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/attention.cuh"

namespace tachyon::kernels::cuda {

// Whether attention_wgmma takes this shape on this device (sm_90 device, head_dim 64 or 128, not
// turned off by set_attention_wgmma).
bool attention_wgmma_supported(int head_dim);
// Tests and the kernel lab: false sends every query tile to the mma.sync kernel (default: on).
void set_attention_wgmma(bool on);

// Whether the wgmma kernel reads caches of this format: f32 (copied as stored) and, but in a
// TACHYON_ATTENTION_BF16 build, bf16 and f16 (widened by its producer); the other formats take
// the mma.sync query-tile kernel, which dequantizes as it stages.
bool attention_wgmma_reads(KvFormat format);

// attention()'s query tiles (at most 128 pairs each: make_query_tiles with the 8-warp tile).
void attention_wgmma(const float* q, const DeviceAttentionMeta& meta, const QueryTile* tiles, int num_tiles,
                     const KvPair& kv, const AttentionShape& shape, int heads_per_chunk, float* out,
                     cudaStream_t stream);

}  // namespace tachyon::kernels::cuda
