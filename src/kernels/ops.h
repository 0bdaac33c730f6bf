// The op set: what every backend implements and every architecture is built from.
//
// Conventions (all backends):
//  - Activations are float32, row-major [rows, features]. Weights are `Weight` views in
//    f32/bf16/f16; every reduction accumulates in f32.
//  - A row's result never depends on the other rows of the call or on the thread count:
//    each op reduces in a fixed order per row (DESIGN.md "Exactness": batch invariance).
//  - Paged KV: a layer's K (and V) cache is [num_blocks, block_size, num_kv_heads, head_dim]
//    f32. A sequence's token at position p lives in block block_table[p / block_size],
//    offset p % block_size.
//
// Usage (what one attention layer does, see model/blocks/attention.cpp):
//   ops.rms_norm(x, norm_w, rows, hidden, eps, 0.f, xn);
//   ops.matmul(xn, rows, q_w, nullptr, q);            // q: [rows, heads * head_dim]
//   ops.rope(q, rows, heads, head_dim, rope, positions);
//   ops.write_kv(k, v, rows, paged, meta);
//   ops.attention(q, rows, paged, meta, params, out);
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/weight.h"

namespace tachyon::kernels {

// Rotary embedding of one layer type, precomputed on the host.
struct RopeTable {
  std::vector<float> inv_freq;    // [rotary_dim / 2]
  int64_t rotary_dim = 0;         // dims rotated (partial rotary: < head_dim)
  float attention_scaling = 1.f;  // yarn/longrope multiply cos and sin by this
  bool interleaved = false;       // pairs (2i, 2i+1) instead of rotate-half (i, i + d/2)
};

// Where a layer's paged KV lives.
struct PagedKv {
  float* k = nullptr;  // [num_blocks, block_size, num_kv_heads, head_dim]
  float* v = nullptr;
  int32_t block_size = 16;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
};

// Per-row attention metadata of a ragged batch (host arrays for the CPU backend).
struct AttentionMeta {
  const int32_t* positions = nullptr;      // [rows] absolute position of each row
  const int32_t* row_seq = nullptr;        // [rows] index of the row's sequence
  const int32_t* block_tables = nullptr;   // all sequences' block tables, concatenated
  const int32_t* block_table_offsets = nullptr;  // [num_seqs + 1] into block_tables
};

struct AttentionParams {
  int64_t num_heads = 0;
  float scale = 1.f;            // applied to q·k
  int64_t sliding_window = 0;   // 0: full causal; W: keys with q - W < k <= q
  float softcap = 0.f;          // 0: none; else scores = softcap * tanh(scores / softcap)
  const float* sinks = nullptr; // [num_heads] extra logit per head in the softmax denominator, or null
};

enum class Activation { SiLU, GeluTanh };

}  // namespace tachyon::kernels
