#include "model/blocks/moe.h"

#include "base/error.h"

namespace tachyon::model {

// More experts than any published MoE has (512) by far. The expert lists below are sized by the
// config's count before any tensor is checked, so a crafted count must not reach them.
constexpr int64_t kMaxExperts = 4096;

void bind_moe(WeightBinder& b, MoeWeights& w, const std::string& p, const MoeOptions& o) {
  const int64_t E = o.routing.num_experts, H = o.hidden, I = o.intermediate;
  if (E < 1 || E > kMaxExperts)
    throw Error("{}: the config's expert count {} is outside 1..{}", p + o.router, E, kMaxExperts);
  if (o.routing.top_k < 1 || o.routing.top_k > E)
    throw Error("{}: num_experts_per_tok {} is outside 1..{} (the experts)", p + o.router, o.routing.top_k, E);
  b.bind(&w.router, p + o.router + ".weight", {E, H}, WeightBinder::Use::Router);
  if (o.router_bias) b.bind(&w.router_bias, p + o.router + ".bias", {E});
  if (o.correction_bias)
    b.bind_remapped(&w.correction_bias, p + o.router + ".e_score_correction_bias", {E},
                    {1, E, [](int64_t, int64_t c) { return c; }, true});
  w.gate_up.resize(static_cast<size_t>(E));
  w.down.resize(static_cast<size_t>(E));
  if (o.layout == MoeOptions::Layout::PerExpert) {
    for (int64_t e = 0; e < E; ++e) {
      const std::string q = p + "experts." + std::to_string(e) + ".";
      b.bind_fused(&w.gate_up[e], {q + "gate_proj.weight", q + "up_proj.weight"}, {{I, H}, {I, H}},
                   WeightBinder::Use::Expert);
      b.bind(&w.down[e], q + "down_proj.weight", {H, I}, WeightBinder::Use::Expert);
    }
  } else {
    // Hub gpt-oss layout: x·W with W [hidden, 2I], gate/up interleaved along 2I. Our
    // [2I, hidden] rows: gate_j = column 2j, up_j = column 2j + 1.
    w.gate_up_bias.resize(static_cast<size_t>(E));
    w.down_bias.resize(static_cast<size_t>(E));
    auto unzip = [I](int64_t r) { return r < I ? 2 * r : 2 * (r - I) + 1; };
    for (int64_t e = 0; e < E; ++e) {
      b.bind_remapped(&w.gate_up[e], p + "experts.gate_up_proj", {E, H, 2 * I},
                      {2 * I, H, [=](int64_t r, int64_t c) { return (e * H + c) * 2 * I + unzip(r); }},
                      WeightBinder::Use::Expert);
      b.bind_remapped(&w.gate_up_bias[e], p + "experts.gate_up_proj_bias", {E, 2 * I},
                      {1, 2 * I, [=](int64_t, int64_t c) { return e * 2 * I + unzip(c); }});
      b.bind_remapped(&w.down[e], p + "experts.down_proj", {E, I, H},
                      {H, I, [=](int64_t r, int64_t c) { return (e * I + c) * H + r; }}, WeightBinder::Use::Expert);
      b.bind_remapped(&w.down_bias[e], p + "experts.down_proj_bias", {E, H},
                      {1, H, [=](int64_t, int64_t c) { return e * H + c; }});
    }
  }
  if (o.shared_intermediate > 0) bind_gated_mlp(b, w.shared, p + o.shared + ".", H, o.shared_intermediate);
  if (o.shared_gate) b.bind(&w.shared_gate, p + "shared_expert_gate.weight", {1, H});
}

void moe_forward(StepContext& ctx, Workspace& ws, const MoeWeights& w, const MoeOptions& o, const float* x,
                 float* out) {
  auto& be = ctx.backend;
  const int64_t rows = ctx.rows, E = o.routing.num_experts, k = o.routing.top_k;
  float* logits = ws.get(Workspace::kRouterLogits, rows * E);       // [rows, E] f32
  int32_t* ids = ws.get_ints(Workspace::kExpertIds, rows * k);       // [rows, k] int32
  float* weights = ws.get(Workspace::kExpertWeights, rows * k);      // [rows, k] f32
  be.router_logits(x, rows, w.router, &w.router_bias, logits);
  kernels::MoeRoutingParams routing = o.routing;
  if (!w.correction_bias.empty()) routing.correction_bias = static_cast<const float*>(w.correction_bias.data);
  be.moe_route(logits, rows, routing, ids, weights);
  kernels::MoeExperts experts;
  experts.gate_up = w.gate_up.data();
  experts.down = w.down.data();
  experts.gate_up_bias = w.gate_up_bias.empty() ? nullptr : w.gate_up_bias.data();
  experts.down_bias = w.down_bias.empty() ? nullptr : w.down_bias.data();
  experts.num_experts = E;
  experts.intermediate = o.intermediate;
  experts.hidden = o.hidden;
  experts.clamped_swiglu = o.clamped_swiglu;
  experts.swiglu_limit = o.swiglu_limit;
  be.moe_experts(x, rows, ids, weights, k, experts, out);
  if (o.shared_intermediate > 0) {
    float* shared = ws.get(Workspace::kShared, rows * o.hidden);  // [rows, hidden] f32
    gated_mlp_forward(ctx, ws, w.shared, kernels::Activation::SiLU, x, shared);
    if (o.shared_gate) {
      float* gate = ws.get(Workspace::kSharedGate, rows);  // [rows, 1] f32
      be.matmul(x, rows, w.shared_gate, nullptr, gate);
      be.gate_multiply(shared, rows, o.hidden, gate, 1, o.hidden, kernels::GateFn::Sigmoid);
    }
    be.add(out, shared, rows * o.hidden);
  }
}

}  // namespace tachyon::model
