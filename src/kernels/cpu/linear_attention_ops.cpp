// CPU causal conv1d and gated delta rule. Work items are (sequence, channel block) and
// (sequence, value head); each walks its sequence's rows in order, so a sequence's result does
// not depend on its batch-mates. Decode (one row per sequence) is a rank-1 update of a
// [dk, dv] state per head, memory-bound on the state.
#include <cmath>
#include <cstring>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/reference/moe_rowwise.h"

namespace tachyon::kernels {

namespace {
ThreadPool& pool() { return ThreadPool::global(); }
constexpr int64_t kChannelBlock = 64;
}  // namespace

void CpuBackend::causal_conv1d_silu(const float* x, int64_t rows, int64_t channels, const Weight& w,
                                    const RecurrentMeta& meta, float* state, int64_t state_stride, float* out) {
  const int64_t K = w.cols, blocks = (channels + kChannelBlock - 1) / kChannelBlock;
  pool().parallel_for(meta.num_seqs * blocks, [&](size_t b, size_t e) {
    thread_local std::vector<float> wc;
    wc.resize(static_cast<size_t>(K));
    for (size_t item = b; item < e; ++item) {
      const int64_t s = static_cast<int64_t>(item) / blocks, c0 = (static_cast<int64_t>(item) % blocks) * kChannelBlock;
      const int64_t c1 = std::min(channels, c0 + kChannelBlock);
      float* st = state + meta.seq_state_slot[s] * state_stride;
      for (int64_t c = c0; c < c1; ++c) {
        for (int64_t i = 0; i < K; ++i) wc[i] = rowwise::load_weight(w, c, i);
        for (int64_t r = meta.seq_row_begin[s]; r < meta.seq_row_begin[s + 1]; ++r) {
          float acc = 0.f;
          for (int64_t i = 0; i < K - 1; ++i) acc = std::fma(wc[i], st[i * channels + c], acc);
          const float xc = x[r * channels + c];
          acc = std::fma(wc[K - 1], xc, acc);
          out[r * channels + c] = rowwise::silu(acc);
          for (int64_t i = 0; i + 1 < K - 1; ++i) st[i * channels + c] = st[(i + 1) * channels + c];
          if (K > 1) st[(K - 2) * channels + c] = xc;
          if (meta.row_snapshot_slot[r] >= 0) {
            float* snap = state + meta.row_snapshot_slot[r] * state_stride;
            for (int64_t i = 0; i < K - 1; ++i) snap[i * channels + c] = st[i * channels + c];
          }
        }
      }
    }
  });
}

void CpuBackend::gated_delta_rule(const float* qkv, int64_t qs, const float* ba, int64_t rows,
                                  const DeltaRuleParams& p, const RecurrentMeta& meta, float* state,
                                  int64_t state_stride, float* out) {
  const int64_t dk = p.k_dim, dv = p.v_dim, Hk = p.num_k_heads, Hv = p.num_v_heads, ratio = Hv / Hk;
  pool().parallel_for(meta.num_seqs * Hv, [&](size_t b, size_t e) {
    thread_local std::vector<float> q, k, delta, o;
    q.resize(static_cast<size_t>(dk)), k.resize(static_cast<size_t>(dk));
    delta.resize(static_cast<size_t>(dv)), o.resize(static_cast<size_t>(dv));
    for (size_t item = b; item < e; ++item) {
      const int64_t s = static_cast<int64_t>(item) / Hv, h = static_cast<int64_t>(item) % Hv;
      float* S = state + meta.seq_state_slot[s] * state_stride + h * dk * dv;  // [dk, dv]
      const float decay_base = -std::exp(p.A_log[h]);
      for (int64_t r = meta.seq_row_begin[s]; r < meta.seq_row_begin[s + 1]; ++r) {
        const float* qr = qkv + r * qs + (h / ratio) * dk;
        const float* kr = qkv + r * qs + Hk * dk + (h / ratio) * dk;
        const float* vr = qkv + r * qs + 2 * Hk * dk + h * dv;
        float qq = 0.f, kk = 0.f;
        for (int64_t i = 0; i < dk; ++i) qq = std::fma(qr[i], qr[i], qq), kk = std::fma(kr[i], kr[i], kk);
        const float qinv = 1.f / std::sqrt(qq + 1e-6f) / std::sqrt(static_cast<float>(dk));
        const float kinv = 1.f / std::sqrt(kk + 1e-6f);
        for (int64_t i = 0; i < dk; ++i) q[i] = qr[i] * qinv, k[i] = kr[i] * kinv;
        const float decay = std::exp(decay_base * rowwise::softplus(ba[r * 2 * Hv + Hv + h] + p.dt_bias[h]));
        const float beta = rowwise::sigmoid(ba[r * 2 * Hv + h]);
        // S ← decay·S;  delta = beta·(v − Sᵀk);  S ← S + k ⊗ delta;  o = Sᵀq
        std::fill(delta.begin(), delta.end(), 0.f);
        for (int64_t i = 0; i < dk; ++i) {
          float* Si = S + i * dv;
          for (int64_t j = 0; j < dv; ++j) {
            Si[j] *= decay;
            delta[j] = std::fma(Si[j], k[i], delta[j]);
          }
        }
        for (int64_t j = 0; j < dv; ++j) delta[j] = (vr[j] - delta[j]) * beta;
        std::fill(o.begin(), o.end(), 0.f);
        for (int64_t i = 0; i < dk; ++i) {
          float* Si = S + i * dv;
          for (int64_t j = 0; j < dv; ++j) {
            Si[j] = std::fma(k[i], delta[j], Si[j]);
            o[j] = std::fma(Si[j], q[i], o[j]);
          }
        }
        std::memcpy(out + r * Hv * dv + h * dv, o.data(), static_cast<size_t>(dv) * sizeof(float));
        if (meta.row_snapshot_slot[r] >= 0)
          std::memcpy(state + meta.row_snapshot_slot[r] * state_stride + h * dk * dv, S,
                      static_cast<size_t>(dk * dv) * sizeof(float));
      }
    }
  });
}

}  // namespace tachyon::kernels
