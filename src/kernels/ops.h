// The op set: what every backend implements and every architecture is built from.
//
// Conventions (all backends):
//  - Activations are float32, row-major [rows, features]. Weights are `Weight` views in
//    f32/bf16/f16; every reduction accumulates in f32.
//  - A row's result never depends on the other rows of the call or on the thread count:
//    each op reduces in a fixed order per row (DESIGN.md "Exactness": batch invariance).
//  - Paged KV: a layer's K (and V) cache is an array of blocks of block_size token slots in
//    one of the storage formats of kernels/kv_format.h (f32: [num_blocks, block_size,
//    num_kv_heads, head_dim] floats). A sequence's token at position p lives in block
//    block_table[p / block_size], offset p % block_size. Backends quantize in write_kv and
//    dequantize while reading (kernels/kv_quant.h); no full-precision copy of the cache exists.
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

#include "kernels/kv_format.h"
#include "kernels/weight.h"

namespace tachyon::kernels {

// Rotary embedding of one layer type, precomputed on the host.
// A row's two most likely entries: `best` is the lowest index among the maxima, `second` the
// lowest among the maxima of the others; p_* are their softmax probabilities over the row.
// A drafter's level (its chain token and runner-up), chosen on the device.
struct TopTwo {
  int32_t best = -1, second = -1;
  float p_best = 0.f, p_second = 0.f;
};

// One logit row's token draw (Backend::sample_tokens), after the request's logits processors:
// temperature (0: the argmax), truncation (top_k 0, top_p 1 and min_p 0 are off) and u, the
// row's uniform draw in [0, 1) from the request's generator on the host, so that the token does
// not depend on which backend draws it. The arithmetic is kernels/token_sampling.h's.
struct TokenSampling {
  float temperature = 0.f;
  int32_t top_k = 0;
  float top_p = 1.f;
  float min_p = 0.f;
  double u = 0.0;
};

struct RopeTable {
  std::vector<float> inv_freq;    // [rotary_dim / 2]
  int64_t rotary_dim = 0;         // dims rotated (partial rotary: < head_dim)
  float attention_scaling = 1.f;  // yarn/longrope multiply cos and sin by this
  bool interleaved = false;       // pairs (2i, 2i+1) instead of rotate-half (i, i + d/2)
  int64_t offset = 0;             // first rotated dim of each head (MLA: the rope part follows the nope part)
};

// Where a layer's paged KV lives and how it is stored (kernels/kv_format.h). k and v point at
// block 0 of each tensor (the same memory for MLA's shared latent cache).
struct PagedKv {
  void* k = nullptr;
  void* v = nullptr;
  int32_t block_size = 16;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  KvFormat format = KvFormat::F32;

  KvTensorLayout k_layout() const { return kv_tensor_layout(kv_codec(format, false), block_size, num_kv_heads, head_dim); }
  KvTensorLayout v_layout() const { return kv_tensor_layout(kv_codec(format, true), block_size, num_kv_heads, head_dim); }
  // Typed views of the unquantized formats: [num_blocks, block_size, num_kv_heads, head_dim].
  float* k_f32() const { return format == KvFormat::F32 ? static_cast<float*>(k) : nullptr; }
  float* v_f32() const { return format == KvFormat::F32 ? static_cast<float*>(v) : nullptr; }
  uint16_t* k_16() const { return format == KvFormat::BF16 || format == KvFormat::F16 ? static_cast<uint16_t*>(k) : nullptr; }
  uint16_t* v_16() const { return format == KvFormat::BF16 || format == KvFormat::F16 ? static_cast<uint16_t*>(v) : nullptr; }
};

// Tree verification (speculative decoding): the draft rows of a sequence may form a tree
// rather than a chain. Each row keeps its logical position (what RoPE, the causal limit and
// the sliding window see: its depth in the tree after the committed tokens), and the tree's
// K/V live at physical positions tree_base + node index. A row reads the key at logical
// position p >= tree_base from physical position tree_base + tree_path[row][p - tree_base]
// (its ancestor at that depth) and writes its own K/V at the same mapping of its position.
// So every row attends over exactly the keys, in exactly the order, that plain decoding of
// its branch would see: the bits are those of the chain (no mask inside the reduction).
constexpr int kMaxTreeDepth = 16;  // nodes on one root-to-leaf path, the root included

// Per-row attention metadata of a ragged batch (host arrays for the CPU backend).
struct AttentionMeta {
  const int32_t* positions = nullptr;      // [rows] absolute position of each row
  const int32_t* row_seq = nullptr;        // [rows] index of the row's sequence
  const int32_t* block_tables = nullptr;   // all sequences' block tables, concatenated
  const int32_t* block_table_offsets = nullptr;  // [num_seqs + 1] into block_tables
  const int32_t* tree_base = nullptr;      // [rows] first tree position of the row's tree, -1 outside trees; or null
  const int32_t* tree_path = nullptr;      // [rows, kMaxTreeDepth] node index of the row's ancestor at each depth
};

// The physical KV position of logical position `p` as seen from `row` (see kMaxTreeDepth).
inline int32_t kv_position(const AttentionMeta& meta, int64_t row, int32_t p) {
  if (!meta.tree_base) return p;
  const int32_t base = meta.tree_base[row];
  return base < 0 || p < base ? p : base + meta.tree_path[row * kMaxTreeDepth + (p - base)];
}

struct AttentionParams {
  int64_t num_heads = 0;
  float scale = 1.f;            // applied to q·k
  int64_t sliding_window = 0;   // 0: full causal; W: keys with q - W < k <= q
  float softcap = 0.f;          // 0: none; else scores = softcap * tanh(scores / softcap)
  const float* sinks = nullptr; // [num_heads] extra logit per head in the softmax denominator (backend memory), or null
};

// Backend::attention_probe's shape: PFlash's scorer (model/blocks/attention_probe.h).
struct AttentionProbeParams {
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int64_t query_rows = 0;       // the batch's last rows: the queries
  float scale = 1.f;            // applied to q·k
  int64_t sliding_window = 0;   // as AttentionParams
  float softcap = 0.f;          // as AttentionParams
  const float* query_weights = nullptr;  // host [query_rows]: scales each row's probabilities for the peak; null: 1
};

// The attention prologue's arguments (Backend::qkv_norm_rope_write_kv and attention_from_qkv):
// per-head RMSNorm of q and k, then RoPE at each row's position.
struct QkvPrologue {
  int64_t num_heads = 0;
  const Weight* q_norm = nullptr;  // [head_dim] (backend memory), or null for none
  const Weight* k_norm = nullptr;
  float eps = 0.f;
  float weight_offset = 0.f;
  const RopeTable* rope = nullptr;
  const int32_t* positions = nullptr;  // host, [rows]
};

enum class Activation { SiLU, GeluTanh };

enum class GateFn { Sigmoid, SiLU };

// Per-sequence recurrent state of linear-attention layers over a ragged batch. A layer's
// state buffer holds fixed-size slots; each sequence works in its own slot, and after a row
// whose row_snapshot_slot is >= 0 the op copies the state into that slot too (a snapshot at a
// KV block boundary, for prefix caching and rollback). Rows of a sequence are contiguous and
// in position order.
struct RecurrentMeta {
  int64_t num_seqs = 0;
  const int32_t* seq_row_begin = nullptr;      // [num_seqs + 1]
  const int32_t* seq_state_slot = nullptr;     // [num_seqs] working slot of each sequence
  const int32_t* row_snapshot_slot = nullptr;  // [rows] slot to snapshot into after the row, or -1
  // Where a forward may start from a block snapshot: positions that are multiples of
  // resume_align (block_size · snapshot interval). A backend that computes runs of rows in
  // chunks (the gated delta rule's prefill form) starts chunks only at absolute positions
  // that are multiples of a divisor of it, so a sequence's bits depend on its own positions
  // and on where its forwards split, never on its batch-mates; forwards split at chunk
  // boundaries give the bits of the unsplit run. 0 or no positions: row by row only.
  const int32_t* seq_first_position = nullptr;  // [num_seqs] absolute position of each sequence's first row
  int32_t resume_align = 0;
};

// Gated delta rule (Gated DeltaNet, Qwen3-Next), per sequence and value head h with key head
// h / (num_v_heads / num_k_heads):
//   q, k = l2norm(q), l2norm(k) (eps 1e-6);  q *= k_dim^-0.5
//   g = -exp(A_log[h]) · softplus(a + dt_bias[h]);  beta = sigmoid(b)
//   S = S · exp(g);  S += k ⊗ beta · (v − Sᵀk);  o = Sᵀ q          S: [k_dim, v_dim]
struct DeltaRuleParams {
  int64_t num_k_heads = 0, num_v_heads = 0, k_dim = 0, v_dim = 0;
  const float* A_log = nullptr;    // [num_v_heads] f32, device
  const float* dt_bias = nullptr;  // [num_v_heads] f32, device
  int64_t state_floats() const { return num_v_heads * k_dim * v_dim; }
};

// Mixture-of-experts routing: from router logits [rows, num_experts] pick top_k experts per
// row and their combine weights.
enum class MoeRouting {
  SoftmaxTopK,       // p = softmax(logits); top-k of p; renormalised when norm_topk_prob (Qwen3-MoE)
  TopKSoftmax,       // top-k of logits; weights = softmax over the k picked logits (gpt-oss)
  SigmoidGroupTopK,  // DeepSeek-V3 noaux_tc: s = sigmoid(logits); choice = s + correction_bias;
                     // keep topk_group groups (group score = sum of its top-2 choices), top-k
                     // inside them; weights = s of the picked, renormalised when norm_topk_prob,
                     // times routed_scaling_factor
};

struct MoeRoutingParams {
  MoeRouting kind = MoeRouting::SoftmaxTopK;
  int64_t num_experts = 0;
  int64_t top_k = 0;
  bool norm_topk_prob = false;
  int64_t n_group = 1, topk_group = 1;           // SigmoidGroupTopK
  float routed_scaling_factor = 1.f;             // SigmoidGroupTopK
  const float* correction_bias = nullptr;        // [num_experts] f32 (SigmoidGroupTopK), device
};

// The experts of one MoE layer, each a gated MLP: y = down(act(gate(x)) ⊙ up(x)) (+ biases).
// gate_up[e] is [2·I, hidden]: gate rows then up rows; down[e] is [hidden, I].
struct MoeExperts {
  const Weight* gate_up = nullptr;       // [num_experts] weights
  const Weight* down = nullptr;          // [num_experts]
  const Weight* gate_up_bias = nullptr;  // [num_experts] of [2·I], or null
  const Weight* down_bias = nullptr;     // [num_experts] of [hidden], or null
  int64_t num_experts = 0;
  int64_t intermediate = 0;              // I
  int64_t hidden = 0;
  // SiLU: act(g) · u.  ClampedSwiGlu (gpt-oss): g = min(g, limit), u = clamp(u, ±limit),
  // (u + 1) · g · sigmoid(alpha · g).
  bool clamped_swiglu = false;
  float swiglu_limit = 7.f, swiglu_alpha = 1.702f;
};

}  // namespace tachyon::kernels
