// Row-wise scalar pieces of the MoE and gating ops, shared by the reference backend and the
// CPU backend (both call them per row, so routing decisions are bit-identical across backends
// and independent of the batch).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/ops.h"
#include "kernels/reference/rowwise.h"

namespace tachyon::kernels::rowwise {

inline float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }
inline float gate_fn(GateFn fn, float g) { return fn == GateFn::Sigmoid ? sigmoid(g) : silu(g); }
// torch.nn.functional.softplus (beta 1, threshold 20)
inline float softplus(float x) { return x > 20.f ? x : std::log1p(std::exp(x)); }

// Indices of the k largest values of v (ties: lower index first), largest first.
inline void top_k_indices(const float* v, int64_t n, int64_t k, int32_t* out) {
  for (int64_t i = 0; i < k; ++i) {
    int32_t best = -1;
    for (int64_t j = 0; j < n; ++j) {
      bool taken = false;
      for (int64_t t = 0; t < i; ++t) taken |= out[t] == j;
      if (!taken && (best < 0 || v[j] > v[best])) best = static_cast<int32_t>(j);
    }
    out[i] = best;
  }
}

inline void moe_route_row(const float* logits, const MoeRoutingParams& p, int32_t* ids, float* weights) {
  const int64_t n = p.num_experts, k = p.top_k;
  thread_local std::vector<float> scores, choice;
  scores.assign(logits, logits + n);
  switch (p.kind) {
    case MoeRouting::SoftmaxTopK: {
      float mx = -std::numeric_limits<float>::infinity(), sum = 0.f;
      for (float s : scores) mx = std::max(mx, s);
      for (float& s : scores) sum += (s = std::exp(s - mx));
      for (float& s : scores) s /= sum;
      top_k_indices(scores.data(), n, k, ids);
      for (int64_t i = 0; i < k; ++i) weights[i] = scores[ids[i]];
      break;
    }
    case MoeRouting::TopKSoftmax: {
      top_k_indices(scores.data(), n, k, ids);
      const float mx = scores[ids[0]];
      float sum = 0.f;
      for (int64_t i = 0; i < k; ++i) sum += (weights[i] = std::exp(scores[ids[i]] - mx));
      for (int64_t i = 0; i < k; ++i) weights[i] /= sum;
      return;  // already normalised
    }
    case MoeRouting::SigmoidGroupTopK: {
      for (float& s : scores) s = sigmoid(s);
      choice.resize(static_cast<size_t>(n));
      for (int64_t e = 0; e < n; ++e) choice[e] = scores[e] + (p.correction_bias ? p.correction_bias[e] : 0.f);
      const int64_t per_group = n / p.n_group;
      thread_local std::vector<float> group_score, masked;
      thread_local std::vector<int32_t> kept;
      group_score.resize(static_cast<size_t>(p.n_group));
      for (int64_t g = 0; g < p.n_group; ++g) {
        int32_t top2[2] = {0, 0};
        top_k_indices(choice.data() + g * per_group, per_group, std::min<int64_t>(2, per_group), top2);
        group_score[g] = choice[g * per_group + top2[0]] + (per_group > 1 ? choice[g * per_group + top2[1]] : 0.f);
      }
      kept.resize(static_cast<size_t>(p.topk_group));
      top_k_indices(group_score.data(), p.n_group, p.topk_group, kept.data());
      masked.assign(static_cast<size_t>(n), 0.f);  // transformers masks dropped groups with 0.0
      for (int32_t g : kept)
        for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e) masked[e] = choice[e];
      top_k_indices(masked.data(), n, k, ids);
      for (int64_t i = 0; i < k; ++i) weights[i] = scores[ids[i]];
      break;
    }
  }
  if (p.norm_topk_prob) {
    float sum = 0.f;
    for (int64_t i = 0; i < k; ++i) sum += weights[i];
    if (p.kind == MoeRouting::SigmoidGroupTopK) sum += 1e-20f;
    for (int64_t i = 0; i < k; ++i) weights[i] /= sum;
  }
  if (p.kind == MoeRouting::SigmoidGroupTopK)
    for (int64_t i = 0; i < k; ++i) weights[i] *= p.routed_scaling_factor;
}

// out[i] = act(gate_up[i], gate_up[I + i]) for one expert row (I = e.intermediate).
inline void expert_activation_row(const float* gate_up, const MoeExperts& e, float* out) {
  const int64_t inter = e.intermediate;
  for (int64_t i = 0; i < inter; ++i) {
    float g = gate_up[i], u = gate_up[inter + i];
    if (e.clamped_swiglu) {
      g = std::min(g, e.swiglu_limit);
      u = std::clamp(u, -e.swiglu_limit, e.swiglu_limit);
      out[i] = (u + 1.f) * (g * sigmoid(g * e.swiglu_alpha));
    } else {
      out[i] = silu(g) * u;
    }
  }
}

// The k slots of a row in ascending expert id (the order experts are summed in).
inline void slots_by_expert(const int32_t* ids, int64_t k, int32_t* order) {
  for (int64_t i = 0; i < k; ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order, order + k, [&](int32_t a, int32_t b) { return ids[a] < ids[b]; });
}

}  // namespace tachyon::kernels::rowwise
