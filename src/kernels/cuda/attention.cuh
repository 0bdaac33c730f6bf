// Paged attention and KV writes over the f32 paged cache of kernels/ops.h.
//
// attention: one CTA per (query tile, KV head, head chunk). A query tile is up to 64 (row, head)
// pairs of consecutive rows of one sequence (built on the host by make_query_tiles); the CTA
// stages 64-key chunks of K and V in shared memory and each pair reduces over its keys in the
// canonical order of attention_chunk.cuh (tensor cores, tf32 or, built with TACHYON_ATTENTION_BF16,
// bf16 in, f32 accumulate: chunks aligned to absolute positions, each computed from zero, chunk
// states merged in order). Rows alone in their sequence (decode) take attention_decode, which
// computes the same chunk states in separate CTAs and merges them in the same order. So a row's
// bits never depend on the other rows of its tile or batch, nor on the kernel: decode, chunked
// prefill and prefill agree exactly. head_dim must be a multiple of 8, at most 256.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace tachyon::kernels::cuda {

struct QueryTile {
  int32_t row0;
  int32_t num_rows;
};

// Device copies of AttentionMeta's arrays.
struct DeviceAttentionMeta {
  const int32_t* positions;
  const int32_t* row_seq;
  const int32_t* block_tables;
  const int32_t* block_table_offsets;
  const int32_t* tree_base;  // null without tree rows (see kernels/ops.h kMaxTreeDepth)
  const int32_t* tree_path;
};

struct AttentionShape {
  int num_heads, num_kv_heads, head_dim, block_size;
  float scale, softcap;
  int sliding_window;
  int unused = 0;      // explicit padding: a launch's argument bytes are its graph key (step_graph.h)
  const float* sinks;  // device [num_heads] or null
};

// Rows per query tile for a GQA group size and head_dim (tiles hold at most 64 (row, head) pairs).
int query_tile_rows(int group, int head_dim);
// Cuts the rows of sequences with more than 16 rows in the call into tiles of at most
// `tile_rows` consecutive rows of one sequence; the rows of shorter runs (decode, speculative
// verification) go to `decode_rows`; so do tree rows (`tree_base` >= 0; they need the
// per-row key mapping that only the decode kernel applies), whatever their run's length.
void make_query_tiles(const int32_t* row_seq, const int32_t* tree_base, int64_t rows, int tile_rows,
                      std::vector<QueryTile>& tiles, std::vector<int32_t>& decode_rows);

void attention(const float* q, const DeviceAttentionMeta& meta, const QueryTile* tiles, int num_tiles,
               const float* k_cache, const float* v_cache, const AttentionShape& shape, float* out,
               cudaStream_t stream);

// Lab switch for cuda_bench: warps per query-tile CTA (4 or 8) and chunk buffers (1, or 2 where
// they fit); the default is 8 warps, 2 buffers.
void set_attention_tile_variant(int warps, int stages);

// Stores k and v rounded to the operand format, tf32 or bf16 (attention_chunk.cuh): the cache
// holds the values the attention's tensor cores read, so no kernel rounds them again; the fused prologue likewise.
void write_kv(const float* k, const float* v, int64_t rows, const DeviceAttentionMeta& meta, float* k_cache,
              float* v_cache, int block_size, int64_t width, cudaStream_t stream);

// Backend::qkv_norm_rope_write_kv's arguments in device memory (norm weights may be null).
// Kernel arguments by value: no implicit padding (a launch's argument bytes are its graph key).
struct QkPrologue {
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  const float* inv_freq = nullptr;
  const int32_t* positions = nullptr;
  int num_heads = 0, kv_heads = 0, head_dim = 0;
  float eps = 0.f, weight_offset = 0.f;
  int half = 0, offset = 0;  // rotated pairs, first rotated dim
  float scaling = 1.f;
  int interleaved = 0;  // pairs (2i, 2i + 1) instead of (i, i + half)
  int unused = 0;
};
static_assert(sizeof(QkPrologue) == 4 * sizeof(void*) + 10 * 4, "QkPrologue must have no padding");
// The fused prologue from qkv [rows, (H + 2·KV)·D], bit-identical to copy_strided, rms_norm
// (warp kernel), rope and write_kv in order; q [rows, H, D] receives q. Returns false (nothing
// launched) for shapes it does not cover (head_dim > 256).
bool qkv_norm_rope_write_kv(const float* qkv, float* q, int64_t rows, const QkPrologue& p,
                            const DeviceAttentionMeta& meta, float* k_cache, float* v_cache, int block_size,
                            cudaStream_t stream);

// Decode rows (the only row of their sequence in the call): split-KV flash decoding, one
// CTA per (row, KV head, 64-key chunk); the last CTA of each (row, KV head) merges. Bit-identical
// to `attention` for the same row. max_chunks = decode_chunks(largest position among `rows`);
// workspace of decode_workspace_bytes(num_rows, num_heads, head_dim, max_chunks); counters:
// num_rows * num_kv_heads zeroed unsigned (left zeroed). With `prologue` (prologue_supported),
// q is the fused projection's output [rows, (H + 2·KV)·D] and the kernel runs the prologue of
// qkv_norm_rope_write_kv for its rows (the same bits; q is not written); then every row must be
// the only row of its sequence in the step, and no tree row.
int decode_chunks(int32_t max_position);
size_t decode_workspace_bytes(int64_t rows, int num_heads, int head_dim, int max_chunks);
bool prologue_supported(const QkPrologue& p);
void attention_decode(const float* q, const QkPrologue* prologue, const DeviceAttentionMeta& meta,
                      const int32_t* rows, int num_rows, int max_chunks, float* k_cache, float* v_cache,
                      const AttentionShape& shape, float* workspace, unsigned* counters, float* out,
                      cudaStream_t stream);

}  // namespace tachyon::kernels::cuda
