// The gated MLP of the llama family: down( act(x·Wgateᵀ) ⊙ x·Wupᵀ ).
// gate_proj and up_proj are fused at load into one [2·I, hidden] matrix (one matmul).
#pragma once

#include "kernels/ops.h"
#include "model/blocks/step_context.h"
#include "model/weights.h"

namespace tachyon::model {

struct GatedMlpWeights {
  Weight gate_up;  // [2·I, hidden]: gate rows then up rows
  Weight down;     // [hidden, I]
};

void bind_gated_mlp(WeightBinder& b, GatedMlpWeights& w, const std::string& prefix, int64_t hidden,
                    int64_t intermediate);

// out [rows, hidden] = MLP(x [rows, hidden])
void gated_mlp_forward(StepContext& ctx, Workspace& ws, const GatedMlpWeights& w, kernels::Activation act,
                       const float* x, float* out);

}  // namespace tachyon::model
