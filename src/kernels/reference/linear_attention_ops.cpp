// Reference (scalar oracle) causal conv1d and gated delta rule: one sequence at a time, one
// token at a time, reductions in double.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/reference/moe_rowwise.h"
#include "kernels/reference/reference_backend.h"

namespace tachyon::kernels {

void ReferenceBackend::causal_conv1d_silu(const float* x, int64_t rows, int64_t channels, const Weight& w,
                                          const RecurrentMeta& meta, float* state, int64_t state_stride, float* out) {
  const int64_t K = w.cols;
  for (int64_t s = 0; s < meta.num_seqs; ++s) {
    float* st = state + meta.seq_state_slot[s] * state_stride;  // [K - 1, channels], oldest first
    for (int64_t r = meta.seq_row_begin[s]; r < meta.seq_row_begin[s + 1]; ++r) {
      for (int64_t c = 0; c < channels; ++c) {
        double acc = double(rowwise::load_weight(w, c, K - 1)) * x[r * channels + c];
        for (int64_t i = 0; i < K - 1; ++i) acc += double(rowwise::load_weight(w, c, i)) * st[i * channels + c];
        out[r * channels + c] = rowwise::silu(static_cast<float>(acc));
      }
      if (K > 1) {
        std::memmove(st, st + channels, static_cast<size_t>((K - 2) * channels) * sizeof(float));
        std::memcpy(st + (K - 2) * channels, x + r * channels, static_cast<size_t>(channels) * sizeof(float));
      }
      if (meta.row_snapshot_slot[r] >= 0)
        std::memcpy(state + meta.row_snapshot_slot[r] * state_stride, st,
                    static_cast<size_t>((K - 1) * channels) * sizeof(float));
    }
  }
}

void ReferenceBackend::gated_delta_rule(const float* qkv, int64_t qs, const float* ba, int64_t rows,
                                        const DeltaRuleParams& p, const RecurrentMeta& meta, float* state,
                                        int64_t state_stride, float* out) {
  const int64_t dk = p.k_dim, dv = p.v_dim, Hk = p.num_k_heads, Hv = p.num_v_heads, ratio = Hv / Hk;
  std::vector<double> q(static_cast<size_t>(dk)), k(static_cast<size_t>(dk)), mem(static_cast<size_t>(dv));
  for (int64_t s = 0; s < meta.num_seqs; ++s)
    for (int64_t r = meta.seq_row_begin[s]; r < meta.seq_row_begin[s + 1]; ++r)
      for (int64_t h = 0; h < Hv; ++h) {
        float* S = state + meta.seq_state_slot[s] * state_stride + h * dk * dv;  // [dk, dv]
        const float* qr = qkv + r * qs + (h / ratio) * dk;
        const float* kr = qkv + r * qs + Hk * dk + (h / ratio) * dk;
        const float* vr = qkv + r * qs + 2 * Hk * dk + h * dv;
        double qq = 0, kk = 0;
        for (int64_t i = 0; i < dk; ++i) qq += double(qr[i]) * qr[i], kk += double(kr[i]) * kr[i];
        const double qinv = 1.0 / std::sqrt(qq + 1e-6) / std::sqrt(double(dk)), kinv = 1.0 / std::sqrt(kk + 1e-6);
        for (int64_t i = 0; i < dk; ++i) q[i] = qr[i] * qinv, k[i] = kr[i] * kinv;
        const double g = -std::exp(double(p.A_log[h])) *
                         rowwise::softplus(ba[r * 2 * Hv + Hv + h] + p.dt_bias[h]);
        const double decay = std::exp(g), beta = 1.0 / (1.0 + std::exp(-double(ba[r * 2 * Hv + h])));
        for (int64_t j = 0; j < dv; ++j) {
          double m = 0;
          for (int64_t i = 0; i < dk; ++i) m += double(S[i * dv + j]) * decay * k[i];
          mem[j] = m;
        }
        for (int64_t j = 0; j < dv; ++j) {
          const double delta = (vr[j] - mem[j]) * beta;
          double o = 0;
          for (int64_t i = 0; i < dk; ++i) {
            const double sij = double(S[i * dv + j]) * decay + k[i] * delta;
            S[i * dv + j] = static_cast<float>(sij);
            o += sij * q[i];
          }
          out[r * Hv * dv + h * dv + j] = static_cast<float>(o);
        }
        if (meta.row_snapshot_slot[r] >= 0)
          std::memcpy(state + meta.row_snapshot_slot[r] * state_stride + h * dk * dv, S,
                      static_cast<size_t>(dk * dv) * sizeof(float));
      }
}

}  // namespace tachyon::kernels
