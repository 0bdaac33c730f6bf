// The CUDA attention's arithmetic on the CPU, for the "cpu-bf16" oracle backend: the canonical
// chunked reduction of kernels/cuda/attention_chunk.cuh with its tensor-core operands rounded
// to tf32 (q, k, p and v: round to nearest, ties away from zero, as cvt.rna.tf32.f32), in plain
// f32 otherwise. It matches the CUDA kernels up to the order of f32 sums inside a chunk (the
// tensor cores' internal order is not specified), which is the point: a model whose logits move
// with these roundings (a routing flip in an MoE) moves the same way here.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace tachyon::kernels::cpu {

float round_to_tf32(float v);

// Backend::attention's contract (kernels/ops.h): q [rows, num_heads, head_dim] -> out.
void attention_tf32_chunks(const float* q, int64_t rows, const PagedKv& kv, const AttentionMeta& meta,
                           const AttentionParams& p, float* out);

}  // namespace tachyon::kernels::cpu
