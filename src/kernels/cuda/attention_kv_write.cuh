// New keys and values into the paged cache (attention_kv_write.cu; attention.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cuda/attention.cuh"

namespace tachyon::kernels::cuda {

// Stores k and v [rows, kv.heads, head_dim] in each row's cache slot. f32: rounded to the operand
// format, tf32 or bf16 (attention_chunk.cuh): the cache holds the values the attention's tensor
// cores read, so no kernel rounds them again; the fused prologue likewise. The other formats:
// kv_quant.h's codes and params, the bytes the CPU backends write (turbo keys rotated).
void write_kv(const float* k, const float* v, int64_t rows, const DeviceAttentionMeta& meta, const KvPair& kv,
              int block_size, int head_dim, cudaStream_t stream);

// Turbo KV (kv_format_rotates_keys): q [rows, heads, head_dim] rotated as the keys are stored
// (kv_quant.h turbo_rotate), into out (may not alias q); head_dim a power of two up to 256.
void rotate_queries(const float* q, int64_t rows, int heads, int head_dim, float* out, cudaStream_t stream);

// The fused prologue from qkv [rows, (H + 2·KV)·D], bit-identical to copy_strided, rms_norm
// (warp kernel), rope and write_kv in order; q [rows, H, D] receives q. Returns false (nothing
// launched) for shapes it does not cover (head_dim > 256).
bool qkv_norm_rope_write_kv(const float* qkv, float* q, int64_t rows, const QkPrologue& p,
                            const DeviceAttentionMeta& meta, const KvPair& kv, int block_size, cudaStream_t stream);

// Whether the fused prologue kernels (this one and attention_decode's) cover p's shape.
bool prologue_supported(const QkPrologue& p);

}  // namespace tachyon::kernels::cuda
