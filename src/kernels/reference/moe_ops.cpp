// Reference (scalar oracle) versions of the MoE, per-head matmul and gating ops.
#include <vector>

#include "base/error.h"
#include "kernels/reference/moe_rowwise.h"
#include "kernels/reference/reference_backend.h"

namespace tachyon::kernels {

namespace {
// y[n] = Σ_k x[k] · w[n, k] (+ bias[n]), reduced in double.
void matvec(const float* x, const Weight& w, const Weight* bias, float* y) {
  for (int64_t n = 0; n < w.rows; ++n) {
    double acc = 0;
    for (int64_t k = 0; k < w.cols; ++k) acc += double(x[k]) * rowwise::load_weight(w, n, k);
    if (bias && !bias->empty()) acc += rowwise::load_weight(*bias, n);
    y[n] = static_cast<float>(acc);
  }
}
}  // namespace

void ReferenceBackend::moe_route(const float* logits, int64_t rows, const MoeRoutingParams& p, int32_t* ids,
                                 float* weights) {
  TACHYON_CHECK(p.top_k > 0 && p.top_k <= p.num_experts, "moe_route: top_k {} of {} experts", p.top_k, p.num_experts);
  for (int64_t r = 0; r < rows; ++r)
    rowwise::moe_route_row(logits + r * p.num_experts, p, ids + r * p.top_k, weights + r * p.top_k);
}

void ReferenceBackend::moe_experts(const float* x, int64_t rows, const int32_t* ids, const float* weights,
                                   int64_t top_k, const MoeExperts& e, float* out) {
  std::vector<Weight> of_kind;
  if (e.num_experts > 0 && for_each_row_kind(rows, e.gate_up[0], [&](int64_t first, int64_t n, bool decode) {
        ReferenceBackend::moe_experts(x + first * e.hidden, n, ids + first * top_k, weights + first * top_k, top_k,
                                      experts_of_kind(e, decode, of_kind), out + first * e.hidden);
      }))
    return;
  std::vector<float> gate_up(static_cast<size_t>(2 * e.intermediate)), h(static_cast<size_t>(e.intermediate)),
      y(static_cast<size_t>(e.hidden));
  std::vector<int32_t> order(static_cast<size_t>(top_k));
  for (int64_t r = 0; r < rows; ++r) {
    float* o = out + r * e.hidden;
    std::fill(o, o + e.hidden, 0.f);
    rowwise::slots_by_expert(ids + r * top_k, top_k, order.data());
    for (int32_t slot : order) {
      const int32_t ex = ids[r * top_k + slot];
      TACHYON_CHECK(ex >= 0 && ex < e.num_experts, "moe_experts: expert id {} out of range", ex);
      matvec(x + r * e.hidden, e.gate_up[ex], e.gate_up_bias ? &e.gate_up_bias[ex] : nullptr, gate_up.data());
      rowwise::expert_activation_row(gate_up.data(), e, h.data());
      matvec(h.data(), e.down[ex], e.down_bias ? &e.down_bias[ex] : nullptr, y.data());
      const float w = weights[r * top_k + slot];
      for (int64_t i = 0; i < e.hidden; ++i) o[i] += y[i] * w;
    }
  }
}

void ReferenceBackend::head_matmul(const float* x, int64_t rows, int64_t heads, int64_t xrs, int64_t xhs,
                                   const Weight& w, float* out, int64_t ors, int64_t ohs) {
  const int64_t n_out = w.rows / heads;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t n = 0; n < n_out; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < w.cols; ++k)
          acc += double(x[r * xrs + h * xhs + k]) * rowwise::load_weight(w, h * n_out + n, k);
        out[r * ors + h * ohs + n] = static_cast<float>(acc);
      }
}

void ReferenceBackend::copy_strided(const float* src, int64_t src_stride, int64_t rows, int64_t width, float* dst,
                                    int64_t dst_stride) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < width; ++i) dst[r * dst_stride + i] = src[r * src_stride + i];
}

void ReferenceBackend::gate_multiply(float* x, int64_t rows, int64_t dim, const float* gate, int64_t gate_stride,
                                     int64_t group, GateFn fn) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < dim; ++i) x[r * dim + i] *= rowwise::gate_fn(fn, gate[r * gate_stride + i / group]);
}

}  // namespace tachyon::kernels
