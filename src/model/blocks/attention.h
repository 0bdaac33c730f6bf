// Multi-head attention with GQA over the paged KV cache (the llama family's layer):
//   q, k, v = x·Wqᵀ (+bq), x·Wkᵀ (+bk), x·Wvᵀ (+bv)     per row
//   q, k = RMSNorm_head(q), RMSNorm_head(k)               if q_norm/k_norm (Qwen3, Gemma3)
//   q, k = RoPE(q, pos), RoPE(k, pos)
//   cache[pos] = k, v
//   o = softmax(q·Kᵀ·scale + causal/window mask)·V            (sinks: one extra logit per head)
//   o = o ⊙ sigmoid(x·Wgateᵀ)                              if output_gate (Qwen3-Next)
//   out = o · Woᵀ (+bo)
#pragma once

#include "io/config.h"
#include "kernels/ops.h"
#include "model/blocks/step_context.h"
#include "model/rope.h"
#include "model/weights.h"

namespace tachyon::model {

struct AttentionWeights {
  // q, k and v projections fused into one matrix (one matmul per layer): [(H + 2·KV)·D, hidden]
  // stored, q rows then k rows then v rows; and their biases likewise ([(H + 2·KV)·D] stored).
  // Qwen3-Next's gated q_proj keeps the separate q, k, v below instead.
  Weight qkv, qkv_bias;
  Weight q, k, v, o;                       // [H·D, hidden], [KV·D, hidden] x2, [hidden, H·D] stored
  Weight q_bias, k_bias, v_bias, o_bias;   // optional [H·D], [KV·D] x2, [hidden] stored
  Weight q_norm, k_norm;                   // optional [D] stored
  Weight sinks;                            // optional [H] f32: one extra softmax logit per head (gpt-oss)
  Weight gate;                             // optional [H·D, hidden] stored: output gate (output_gate)
};

// What an architecture file says about one layer's attention. Tensors under the module's
// prefix ("model.layers.3.self_attn."): q_proj, k_proj, v_proj .weight [H·D, hidden],
// [KV·D, hidden] x2 and o_proj.weight [hidden, H·D], all stored dtype; the optional ones below.
struct AttentionOptions {
  int64_t hidden = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
  float scale = 1.f;                 // usually head_dim^-0.5
  int64_t sliding_window = 0;        // 0: full attention; else key k visible to query q iff q − W < k ≤ q
  float softcap = 0.f;               // 0: none; else scores become softcap · tanh(scores / softcap)
  bool qkv_bias = false;             // {q,k,v}_proj.bias [H·D], [KV·D] x2 stored
  bool o_bias = false;               // o_proj.bias [hidden] stored
  bool qk_norm = false;              // q_norm.weight, k_norm.weight [D] stored: RMSNorm per head before RoPE
  float norm_eps = 1e-6f, norm_weight_offset = 0.f;  // of q_norm/k_norm: x / rms(x) · (offset + w)
  bool sinks = false;                // sinks [H] (to f32): one extra softmax logit per head
  // q_proj.weight is [H·2D, hidden], per head D query rows then D gate rows; the attention
  // output is multiplied by sigmoid(gate) before o_proj.
  bool output_gate = false;
  io::RopeParams rope_params;
  int64_t max_position_embeddings = 0;
  kernels::RopeTable rope;           // precomputed unless the rope type depends on length
};

// The llama family's reading of config.json for `layer`: num_attention_heads,
// num_key_value_heads, head_dim, scale head_dim^-0.5, the RoPE of the layer's type in `layout`,
// and sliding_window on layers whose type (layer_types) is "sliding_attention"; q/k norms use
// rms_norm_eps. No biases, norms, sinks or gate: the architecture adds what its layer has.
AttentionOptions attention_options(const io::ModelConfig& config, int64_t layer, RopeLayout layout);

// Binds the tensors of `opt` under `prefix` ("model.layers.3.self_attn.").
void bind_attention(WeightBinder& binder, AttentionWeights& w, const std::string& prefix, const AttentionOptions& opt);

// out [rows, hidden] = Attention(x [rows, hidden]); writes this layer's K/V for every row.
// `meta`: the block tables of the layer's KV group (StepContext::attention_meta).
void attention_forward(StepContext& ctx, Workspace& ws, const AttentionWeights& w, const AttentionOptions& opt,
                       const kernels::PagedKv& kv, const kernels::AttentionMeta& meta, const float* x, float* out);

}  // namespace tachyon::model
