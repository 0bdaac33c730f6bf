// Sparse mixture-of-experts feed-forward (Qwen3-MoE, Qwen3-Next, DeepSeek-V3, gpt-oss):
//   logits = x·Wrouterᵀ (+ b_router)                      [rows, E]
//   (ids, w) = route(logits)                              top-k per row (kernels::MoeRouting)
//   y = Σ_k w_k · Expert_{ids_k}(x)                       grouped over the rows of each expert
//   y += Shared(x) [· sigmoid(x·w_shared_gate)]           shared expert(s), when present
// The router logits, routing and the grouped expert matmul are backend ops (router_logits,
// moe_route, moe_experts).
#pragma once

#include <string>
#include <vector>

#include "kernels/ops.h"
#include "model/blocks/mlp.h"
#include "model/blocks/step_context.h"
#include "model/weights.h"

namespace tachyon::model {

struct MoeOptions {
  kernels::MoeRoutingParams routing;  // kind, num_experts, top_k, norm_topk_prob, groups, scaling
  int64_t hidden = 0, intermediate = 0;
  // Checkpoint layout of the experts:
  //   PerExpert   "{p}experts.{e}.{gate,up,down}_proj.weight" [I, hidden] x2, [hidden, I]
  //   FusedGptOss "{p}experts.gate_up_proj" [E, hidden, 2I] (gate = even columns, up = odd),
  //               "{p}experts.gate_up_proj_bias" [E, 2I], "{p}experts.down_proj" [E, I, hidden],
  //               "{p}experts.down_proj_bias" [E, hidden]
  enum class Layout { PerExpert, FusedGptOss } layout = Layout::PerExpert;
  std::string router = "gate";         // "{p}{router}.weight" [E, hidden]
  bool router_bias = false;            // "{p}{router}.bias" [E]
  bool correction_bias = false;        // "{p}{router}.e_score_correction_bias" [E] (DeepSeek-V3)
  bool clamped_swiglu = false;         // gpt-oss activation with swiglu_limit
  float swiglu_limit = 7.f;
  int64_t shared_intermediate = 0;     // > 0: "{p}{shared}.{gate,up,down}_proj.weight"
  std::string shared = "shared_expert";
  bool shared_gate = false;            // "{p}shared_expert_gate.weight" [1, hidden] (Qwen3-Next)
};

struct MoeWeights {
  Weight router, router_bias;          // [E, hidden], optional [E] stored
  Weight correction_bias;              // optional [E] f32
  std::vector<Weight> gate_up, down;   // E x [2I, hidden], E x [hidden, I] stored
  std::vector<Weight> gate_up_bias, down_bias;  // gpt-oss: E x [2I], E x [hidden] stored
  GatedMlpWeights shared;              // optional
  Weight shared_gate;                  // optional [1, hidden] stored
};

void bind_moe(WeightBinder& binder, MoeWeights& w, const std::string& prefix, const MoeOptions& opt);

// out [rows, hidden] = MoE(x [rows, hidden])
void moe_forward(StepContext& ctx, Workspace& ws, const MoeWeights& w, const MoeOptions& opt, const float* x,
                 float* out);

}  // namespace tachyon::model
