// The gated MLP of the llama family: down( act(x·Wgateᵀ) ⊙ x·Wupᵀ ).
// gate_proj and up_proj are fused at load into one [2·I, hidden] matrix (one matmul).
#pragma once

#include "io/config.h"
#include "kernels/ops.h"
#include "model/blocks/step_context.h"
#include "model/weights.h"

namespace tachyon::model {

struct GatedMlpWeights {
  Weight gate_up;  // [2·I, hidden] stored: gate rows then up rows
  Weight down;     // [hidden, I] stored
};

// Tensors under the module's prefix ("model.layers.3.mlp."): gate_proj.weight, up_proj.weight
// [I, hidden] and down_proj.weight [hidden, I], stored dtype.
struct GatedMlpOptions {
  int64_t hidden = 0, intermediate = 0;
  kernels::Activation activation = kernels::Activation::SiLU;
};

// The activation config.json names under "hidden_activation" (Gemma) or else "hidden_act";
// `fallback` when it names none. silu and gelu_pytorch_tanh are supported.
kernels::Activation hidden_activation(const io::ModelConfig& config, const std::string& fallback);
// The dense gated MLP of config.json: hidden_size, intermediate_size, its activation (or `fallback`).
GatedMlpOptions gated_mlp_options(const io::ModelConfig& config, const std::string& fallback = "silu");

void bind_gated_mlp(WeightBinder& b, GatedMlpWeights& w, const std::string& prefix, int64_t hidden,
                    int64_t intermediate);

// out [rows, hidden] = MLP(x [rows, hidden])
void gated_mlp_forward(StepContext& ctx, Workspace& ws, const GatedMlpWeights& w, kernels::Activation act,
                       const float* x, float* out);

}  // namespace tachyon::model
