// Prefill and chunked-prefill attention over query tiles (attention_prefill.cu; attention.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cuda/attention.cuh"

namespace tachyon::kernels::cuda {

// Rows per query tile for a GQA group size and head_dim (tiles hold at most 64 (row, head) pairs).
int query_tile_rows(int group, int head_dim);
// Cuts the rows of sequences with more than 16 rows in the call into tiles of at most
// `tile_rows` consecutive rows of one sequence; the rows of shorter runs (decode, speculative
// verification) go to `decode_rows`; so do tree rows (`tree_base` >= 0; they need the
// per-row key mapping that only the decode kernel applies), whatever their run's length.
void make_query_tiles(const int32_t* row_seq, const int32_t* tree_base, int64_t rows, int tile_rows,
                      std::vector<QueryTile>& tiles, std::vector<int32_t>& decode_rows);

void attention(const float* q, const DeviceAttentionMeta& meta, const QueryTile* tiles, int num_tiles,
               const KvPair& kv, const AttentionShape& shape, float* out, cudaStream_t stream);

// Whether this GPU's shared memory per block holds the attention kernels' smallest shapes for
// head_dim and `group` query heads per KV head (K and V apart, attention.cuh: one 64-key chunk of
// f32 K, then V; every head_dim up to 256 on sm_86 / sm_89's 99 KB, the decode kernel up to 16
// query heads per KV head there at head_dim 256); attention and attention_decode fail clearly elsewhere.
bool attention_fits(int head_dim, int group);

// Lab switch for cuda_bench: warps per query-tile CTA (2 or 8) and chunk buffers (1, or 2 where
// they fit); the default is 8 warps, 2 buffers (fewer where the GPU's shared memory needs it).
void set_attention_tile_variant(int warps, int stages);

}  // namespace tachyon::kernels::cuda
