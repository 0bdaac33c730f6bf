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
#include "model/weights.h"

namespace tachyon::model {

struct AttentionWeights {
  // q, k and v projections fused into one matrix (one matmul per layer): [(H + 2·KV)·D, hidden],
  // q rows then k rows then v rows; and their biases likewise. Qwen3-Next's gated q_proj keeps
  // the separate q, k, v below instead.
  Weight qkv, qkv_bias;
  Weight q, k, v, o;                       // [H·D, hidden], [KV·D, hidden] x2, [hidden, H·D]
  Weight q_bias, k_bias, v_bias, o_bias;   // optional [H·D], [KV·D] x2, [hidden]
  Weight q_norm, k_norm;                   // optional [D]
  Weight sinks;                            // optional [H] f32: one extra softmax logit per head (gpt-oss)
  Weight gate;                             // optional [H·D, hidden]: output gate (output_gate)
};

struct AttentionOptions {
  int64_t hidden = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
  float scale = 1.f;                 // usually head_dim^-0.5
  int64_t sliding_window = 0;        // 0: full attention
  float softcap = 0.f;
  float norm_eps = 1e-6f, norm_weight_offset = 0.f;  // for q_norm/k_norm
  io::RopeParams rope_params;
  int64_t max_position_embeddings = 0;
  kernels::RopeTable rope;           // precomputed unless the rope type depends on length
  // Qwen3-Next: q_proj is [H·2D, hidden], per head D query rows then D gate rows; the
  // attention output is multiplied by sigmoid(gate) before o_proj.
  bool output_gate = false;
};

// Binds the tensors under `prefix` ("model.layers.3.self_attn."): q_proj/k_proj/v_proj/o_proj
// weights, biases when `qkv_bias`/`o_bias`, q_norm/k_norm when `qk_norm`.
void bind_attention(WeightBinder& binder, AttentionWeights& w, const std::string& prefix, const AttentionOptions& opt,
                    bool qkv_bias, bool o_bias, bool qk_norm);
// Binds "{prefix}sinks" [H] as float32.
void bind_attention_sinks(WeightBinder& binder, AttentionWeights& w, const std::string& prefix,
                          const AttentionOptions& opt);

// out [rows, hidden] = Attention(x [rows, hidden]); writes this layer's K/V for every row.
void attention_forward(StepContext& ctx, Workspace& ws, const AttentionWeights& w, const AttentionOptions& opt,
                       const kernels::PagedKv& kv, const float* x, float* out);

}  // namespace tachyon::model
