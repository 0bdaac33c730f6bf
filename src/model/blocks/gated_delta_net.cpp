#include "model/blocks/gated_delta_net.h"

namespace tachyon::model {

void bind_gated_delta_net(WeightBinder& b, GatedDeltaNetWeights& w, const std::string& p,
                          const GatedDeltaNetOptions& o) {
  const int64_t H = o.hidden, Hk = o.num_k_heads, dk = o.k_dim, ratio = o.num_v_heads / o.num_k_heads;
  const int64_t vg = ratio * o.v_dim;        // value (and z) width of one key-head group
  const int64_t group = 2 * dk + 2 * vg;     // in_proj_qkvz rows per group
  const int64_t kd = o.key_dim(), vd = o.value_dim();
  const std::vector<int64_t> qkvz_shape = {Hk * group, H};
  // W_qkv row: q (head g, i) = g·group + i; k = g·group + dk + i; v (group g, m) = g·group + 2dk + m.
  auto qkv_row = [=](int64_t r) {
    if (r < kd) return (r / dk) * group + r % dk;
    if (r < 2 * kd) return ((r - kd) / dk) * group + dk + (r - kd) % dk;
    return ((r - 2 * kd) / vg) * group + 2 * dk + (r - 2 * kd) % vg;
  };
  b.bind_remapped(&w.qkv, p + "in_proj_qkvz.weight", qkvz_shape,
                  {o.conv_dim(), H, [=](int64_t r, int64_t c) { return qkv_row(r) * H + c; }});
  b.bind_remapped(&w.z, p + "in_proj_qkvz.weight", qkvz_shape,
                  {vd, H, [=](int64_t r, int64_t c) { return ((r / vg) * group + 2 * dk + vg + r % vg) * H + c; }});
  // W_ba row j < Hv: b of value head j = group j / ratio, slot j % ratio; row Hv + j: a.
  const int64_t Hv = o.num_v_heads;
  b.bind_remapped(&w.ba, p + "in_proj_ba.weight", {Hk * 2 * ratio, H},
                  {2 * Hv, H, [=](int64_t r, int64_t c) {
                     const int64_t j = r % Hv, is_a = r / Hv;
                     return ((j / ratio) * 2 * ratio + is_a * ratio + j % ratio) * H + c;
                   }});
  b.bind_remapped(&w.conv, p + "conv1d.weight", {o.conv_dim(), 1, o.conv_kernel},
                  {o.conv_dim(), o.conv_kernel, [=](int64_t r, int64_t c) { return r * o.conv_kernel + c; }});
  b.bind_remapped(&w.A_log, p + "A_log", {Hv}, {1, Hv, [](int64_t, int64_t c) { return c; }, true});
  b.bind_remapped(&w.dt_bias, p + "dt_bias", {Hv}, {1, Hv, [](int64_t, int64_t c) { return c; }, true});
  b.bind(&w.norm, p + "norm.weight", {o.v_dim});
  b.bind(&w.out, p + "out_proj.weight", {H, vd});
}

void gated_delta_net_forward(StepContext& ctx, Workspace& ws, const GatedDeltaNetWeights& w,
                             const GatedDeltaNetOptions& o, float* state, const float* x, float* out) {
  auto& be = ctx.backend;
  const int64_t rows = ctx.rows, cd = o.conv_dim(), vd = o.value_dim(), Hv = o.num_v_heads;
  float* mixed = ws.get(Workspace::kQ, rows * cd);            // [rows, conv_dim] f32 before the conv
  float* conv = ws.get(Workspace::kK, rows * cd);             // [rows, conv_dim] f32 after conv + SiLU
  float* z = ws.get(Workspace::kV, rows * vd);                // [rows, Hv, dv] f32
  float* ba = ws.get(Workspace::kScratch0, rows * 2 * Hv);    // [rows, 2·Hv] f32
  float* core = ws.get(Workspace::kAttn, rows * vd);          // [rows, Hv, dv] f32
  be.matmul(x, rows, w.qkv, nullptr, mixed);
  be.matmul(x, rows, w.z, nullptr, z);
  be.matmul(x, rows, w.ba, nullptr, ba);
  const int64_t stride = o.state_floats();
  be.causal_conv1d_silu(mixed, rows, cd, w.conv, ctx.recurrent, state, stride, conv);
  kernels::DeltaRuleParams params;
  params.num_k_heads = o.num_k_heads;
  params.num_v_heads = Hv;
  params.k_dim = o.k_dim;
  params.v_dim = o.v_dim;
  params.A_log = static_cast<const float*>(w.A_log.data);
  params.dt_bias = static_cast<const float*>(w.dt_bias.data);
  be.gated_delta_rule(conv, cd, ba, rows, params, ctx.recurrent, state + o.conv_state_floats(), stride, core);
  be.rms_norm(core, w.norm, rows * Hv, o.v_dim, o.norm_eps, 0.f, core);
  be.gate_multiply(core, rows * Hv, o.v_dim, z, o.v_dim, 1, kernels::GateFn::SiLU);
  be.matmul(core, rows, w.out, nullptr, out);
}

}  // namespace tachyon::model
