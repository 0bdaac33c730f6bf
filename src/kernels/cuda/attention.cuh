// Paged attention and KV writes over the paged cache of kernels/ops.h, in any stored format of
// kernels/kv_format.h (f32 rows copied as they are, the others dequantized in registers as staged).
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
//
// This header holds the types the attention kernels share and includes their headers:
// attention_prefill.cuh (query tiles), attention_decode.cuh (split-KV decode) and
// attention_kv_write.cuh (cache writes, the fused prologue); attention_wgmma.cuh (query tiles on
// sm_90a) is the prefill kernel's own.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/kv_codec.cuh"

namespace tachyon::kernels::cuda {

// One layer's paged K and V caches in their stored format (kernels/kv_format.h): what the
// attention kernels read and the KV writes fill. Kernel argument by value, no implicit padding.
struct KvPair {
  DeviceKvTensor k, v;
  int32_t heads = 0;  // KV heads
  int32_t format_id = 0;  // KvFormat
  __host__ __device__ KvFormat format() const { return static_cast<KvFormat>(format_id); }
  __host__ __device__ bool f32() const { return format_id == static_cast<int32_t>(KvFormat::F32); }
};
static_assert(sizeof(KvPair) == 2 * sizeof(DeviceKvTensor) + 8, "KvPair must have no padding");

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

// K and V apart: the attention kernels' variant for small shared memory (query tiles and decode).
// A CTA stages a chunk's K, computes its scores, then stages the chunk's V into the same buffer
// for p·v: one 64-key buffer of 64 · (head_dim + 4) floats where the other variants hold K and V
// together, the same 64-key chunks and arithmetic, so the same bits. Chosen only where K and V do
// not fit the GPU's shared memory per block together: head_dim above ~168 at 99 KB (sm_86, sm_89;
// head_dim 256 needs 130 KB for both, 65 KB for one).
// Tests: force_attention_kv_apart(true) makes every query-tile and decode launch take it (false:
// only where needed); attention_kv_apart_launches counts the launches that took it, process-wide.
void force_attention_kv_apart(bool on);
bool attention_kv_apart_forced();
struct KvApartLaunches {
  uint64_t query_tiles = 0, decode = 0;
};
KvApartLaunches attention_kv_apart_launches();
void count_attention_kv_apart_launch(bool decode);

}  // namespace tachyon::kernels::cuda

#include "kernels/cuda/attention_decode.cuh"
#include "kernels/cuda/attention_kv_write.cuh"
#include "kernels/cuda/attention_prefill.cuh"
