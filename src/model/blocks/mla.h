// Multi-head latent attention (DeepSeek-V2/V3), with the latent KV cache and absorbed
// up-projections:
//   q      = W_qb · RMSNorm(W_qa · x)        (or W_q · x without q_lora_rank)   [H, nope + rope]
//   c, kr  = W_kva · x                        latent [kv_lora_rank], rope key [rope] (one per token)
//   c      = RMSNorm(c);  q_rope, kr = RoPE(q_rope), RoPE(kr)
//   cache[pos] = [c, kr]                      kv_lora_rank + rope floats per token and layer
// With W_kvb = [W_uk_h; W_uv_h] per head (k_nope_h = W_uk_h · c, v_h = W_uv_h · c):
//   score_hj = (q_nope_h · W_uk_h c_j + q_rope_h · kr_j) · scale
//            = [W_uk_hᵀ q_nope_h, q_rope_h] · [c_j, kr_j] · scale        (absorbed: one MQA head)
//   o_h      = W_uv_h · Σ_j p_hj c_j;   out = W_o · [o_1 … o_H]
// The cache holds [c, kr] once (KvLayout::shared_kv: the same rows serve as K and V; the
// attention's trailing rope columns of the output are ignored).
#pragma once

#include "io/config.h"
#include "kernels/ops.h"
#include "model/blocks/step_context.h"
#include "model/weights.h"

namespace tachyon::model {

struct MlaOptions {
  int64_t hidden = 0, num_heads = 0;
  int64_t q_lora_rank = 0;      // 0: a plain q_proj
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  float scale = 1.f;            // qk_head_dim^-0.5 (· mscale² under yarn)
  float norm_eps = 1e-6f;
  kernels::RopeTable rope;      // rotary_dim = qk_rope_head_dim, interleaved per rope_interleave
  int64_t cache_dim() const { return kv_lora_rank + qk_rope_head_dim; }
};

struct MlaWeights {
  Weight q_a, q_a_norm, q_b;    // [q_lora, hidden], [q_lora], [H·(nope+rope), q_lora] stored
  Weight q;                     // [H·(nope+rope), hidden] stored, when q_lora_rank = 0
  Weight kv_a;                  // [kv_lora + rope, hidden] stored
  Weight kv_a_norm;             // [kv_lora] stored
  Weight uk_t;                  // [H·kv_lora, nope] stored: W_uk_hᵀ, taken from kv_b_proj
  Weight uv;                    // [H·v, kv_lora] stored: W_uv_h, taken from kv_b_proj
  Weight o;                     // [hidden, H·v] stored
};

// Binds "{prefix}q_a_proj" … "{prefix}o_proj" (kv_b_proj [H·(nope+v), kv_lora] split per head).
void bind_mla(WeightBinder& binder, MlaWeights& w, const std::string& prefix, const MlaOptions& opt);

// out [rows, hidden] = MLA(x [rows, hidden]); writes this layer's [c, kr] for every row.
void mla_forward(StepContext& ctx, Workspace& ws, const MlaWeights& w, const MlaOptions& opt,
                 const kernels::PagedKv& kv, const float* x, float* out);

}  // namespace tachyon::model
