// Gated DeltaNet linear attention (Qwen3-Next "linear_attention" layers;
// https://arxiv.org/abs/2412.06464):
//   [q, k, v] = conv1d_causal(x·W_qkvᵀ) then SiLU        q, k: [Hk, dk], v: [Hv, dv]
//   z = x·W_zᵀ;  [b, a] = x·W_baᵀ                        z: [Hv, dv], b, a: [Hv]
//   o = GatedDeltaRule(q, k, v, g(a), beta(b))            per value head (kernels::DeltaRuleParams)
//   out = W_out · (RMSNorm_w(o_h) ⊙ silu(z_h))            RMSNorm over dv with weight w (not 1 + w)
// The recurrent state of a sequence (conv window [kernel − 1, conv_dim] then the delta-rule
// state [Hv, dk, dv]) lives in the KV cache's state slots (kv::KvCache::state).
// Checkpoint layout: in_proj_qkvz [Hk·(2dk + 2·(Hv/Hk)·dv), hidden] groups rows by key head
// ([q_g, k_g, v_g, z_g] per group), in_proj_ba [Hk·2·(Hv/Hk), hidden] likewise ([b_g, a_g]);
// both are regrouped at load into W_qkv (conv channel order), W_z and W_ba.
#pragma once

#include "kernels/ops.h"
#include "model/blocks/step_context.h"
#include "model/weights.h"

namespace tachyon::model {

struct GatedDeltaNetOptions {
  int64_t hidden = 0;
  int64_t num_k_heads = 0, num_v_heads = 0, k_dim = 0, v_dim = 0;
  int64_t conv_kernel = 4;
  float norm_eps = 1e-6f;
  int64_t key_dim() const { return num_k_heads * k_dim; }
  int64_t value_dim() const { return num_v_heads * v_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
  int64_t conv_state_floats() const { return (conv_kernel - 1) * conv_dim(); }
  int64_t state_floats() const { return conv_state_floats() + num_v_heads * k_dim * v_dim; }
};

struct GatedDeltaNetWeights {
  Weight qkv;       // [conv_dim, hidden] stored
  Weight z;         // [value_dim, hidden] stored
  Weight ba;        // [2·Hv, hidden] stored: b rows then a rows
  Weight conv;      // [conv_dim, kernel] stored
  Weight A_log;     // [Hv] f32
  Weight dt_bias;   // [Hv] f32
  Weight norm;      // [dv] stored
  Weight out;       // [hidden, value_dim] stored
};

void bind_gated_delta_net(WeightBinder& binder, GatedDeltaNetWeights& w, const std::string& prefix,
                          const GatedDeltaNetOptions& opt);

// out [rows, hidden] = GatedDeltaNet(x [rows, hidden]); advances each sequence's state in
// `state` ([slots, opt.state_floats()], see kv::KvCache::state).
void gated_delta_net_forward(StepContext& ctx, Workspace& ws, const GatedDeltaNetWeights& w,
                             const GatedDeltaNetOptions& opt, float* state, const float* x, float* out);

}  // namespace tachyon::model
