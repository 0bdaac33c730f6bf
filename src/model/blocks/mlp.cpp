#include "model/blocks/mlp.h"

#include "base/error.h"

namespace tachyon::model {

kernels::Activation hidden_activation(const io::ModelConfig& c, const std::string& fallback) {
  const std::string key = c.raw.contains("hidden_activation") ? "hidden_activation" : "hidden_act";
  const std::string act = c.raw.value(key, fallback);
  if (act == "silu") return kernels::Activation::SiLU;
  if (act == "gelu_pytorch_tanh") return kernels::Activation::GeluTanh;
  throw Error("{}: {} '{}' is not supported for model_type '{}'", c.path, key, act, c.model_type);
}

GatedMlpOptions gated_mlp_options(const io::ModelConfig& config, const std::string& fallback) {
  return {config.hidden_size, config.intermediate_size, hidden_activation(config, fallback)};
}

void bind_gated_mlp(WeightBinder& b, GatedMlpWeights& w, const std::string& p, int64_t hidden, int64_t intermediate) {
  b.bind_fused(&w.gate_up, {p + "gate_proj.weight", p + "up_proj.weight"},
               {{intermediate, hidden}, {intermediate, hidden}}, WeightBinder::Use::Matmul);
  b.bind(&w.down, p + "down_proj.weight", {hidden, intermediate}, WeightBinder::Use::Matmul);
}

void gated_mlp_forward(StepContext& ctx, Workspace& ws, const GatedMlpWeights& w, kernels::Activation act,
                       const float* x, float* out) {
  const int64_t rows = ctx.rows, inter = w.down.cols;
  float* gate_up = ws.get(Workspace::kGateUp, rows * 2 * inter);  // [rows, 2·I] f32
  float* h = ws.get(Workspace::kAct, rows * inter);               // [rows, I] f32
  ctx.backend.gated_mlp(x, rows, w.gate_up, w.down, act, gate_up, h, out);
}

}  // namespace tachyon::model
