// Split-KV decode attention (attention_decode.cu; attention.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cuda/attention.cuh"

namespace tachyon::kernels::cuda {

// Decode rows (the only row of their sequence in the call): split-KV flash decoding, one
// CTA per (row, KV head, 64-key chunk); the last CTA of each (row, KV head) merges (from 64 chunks
// on, a merge kernel of one warp per (row, head, 32 dimensions)). Bit-identical
// to `attention` for the same row. max_chunks = decode_chunks(largest position among `rows`);
// workspace of decode_workspace_bytes(num_rows, num_heads, head_dim, max_chunks); counters:
// num_rows * num_kv_heads zeroed unsigned (left zeroed). With `prologue` (prologue_supported),
// q is the fused projection's output [rows, (H + 2·KV)·D] and the kernel runs the prologue of
// qkv_norm_rope_write_kv for its rows (the same bits; q is not written); then every row must be
// the only row of its sequence in the step, and no tree row. kv: any stored format; a format that
// rotates its keys (turbo) takes q already rotated (rotate_queries) and no prologue.
int decode_chunks(int32_t max_position);
size_t decode_workspace_bytes(int64_t rows, int num_heads, int head_dim, int max_chunks);
void attention_decode(const float* q, const QkPrologue* prologue, const DeviceAttentionMeta& meta,
                      const int32_t* rows, int num_rows, int max_chunks, const KvPair& kv,
                      const AttentionShape& shape, float* workspace, unsigned* counters, float* out,
                      cudaStream_t stream);
// Launches (process-wide) that merged their chunk states in a kernel of their own (long contexts).
int64_t attention_decode_merge_launches();
// Whether a decode CTA (without the cluster's states) fits this GPU's shared memory per block.
bool attention_decode_fits(int head_dim, int group);

}  // namespace tachyon::kernels::cuda
