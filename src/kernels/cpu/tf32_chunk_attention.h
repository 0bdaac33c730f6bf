// The CUDA attention's arithmetic on the CPU, for the "cpu-bf16" oracle backend: the canonical
// chunked reduction of kernels/cuda/attention_chunk.cuh with its tensor-core operands rounded
// to tf32 (q, k, p and v: round to nearest, ties away from zero, as cvt.rna.tf32.f32; or to
// bf16, AttentionOperands), in plain f32 otherwise. It matches the CUDA kernels up to the order
// of f32 sums inside a chunk (the tensor cores' internal order is not specified), which is the
// point: a model whose logits move with these roundings (a routing flip in an MoE) moves the
// same way here.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace tachyon::kernels::cpu {

float round_to_tf32(float v);

// The tensor-core operands' format: tf32 (what the CUDA kernels use), or bf16 (round to nearest
// even, as __floats2bfloat162_rn), the format a bf16 mma.m16n8k16 / wgmma attention would use;
// cpu-bf16 with bf16 operands measures what that precision would cost (bench/precision).
enum class AttentionOperands { kTf32, kBf16 };

#ifndef TACHYON_ATTENTION_BF16
#define TACHYON_ATTENTION_BF16 0
#endif
// The format the CUDA attention kernels are built with (CMake option TACHYON_ATTENTION_BF16):
// cpu-bf16's default, and what the CUDA KV cache holds.
inline constexpr AttentionOperands kCudaAttentionOperands =
    TACHYON_ATTENTION_BF16 ? AttentionOperands::kBf16 : AttentionOperands::kTf32;

// v rounded to `format` (bf16: round to nearest even).
float round_attention_operand(float v, AttentionOperands format = kCudaAttentionOperands);

// Backend::attention's contract (kernels/ops.h): q [rows, num_heads, head_dim] -> out.
void attention_tf32_chunks(const float* q, int64_t rows, const PagedKv& kv, const AttentionMeta& meta,
                           const AttentionParams& p, float* out,
                           AttentionOperands operands = AttentionOperands::kTf32);

}  // namespace tachyon::kernels::cpu
