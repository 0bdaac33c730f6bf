// The gated delta rule loops shared by isa/delta_rule_portable.cpp and isa/delta_rule_avx2.cpp
// (included by those two files only; internal linkage, since each compiles them with its own
// flags). Every loop is either a scalar in-order reduction or an axpy over a contiguous
// dimension written with std::fma, which the AVX2 build vectorises lane by lane: same bits.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/isa/delta_rule.h"
#include "kernels/reference/moe_rowwise.h"

namespace tachyon::kernels::cpu {
namespace {

// q, k of one row, l2-normalised (eps 1e-6), q also scaled by dk^-0.5; the recurrent path's formula.
inline void normalise_qk(const float* qr, const float* kr, int64_t dk, float* q, float* k) {
  float qq = 0.f, kk = 0.f;
  for (int64_t i = 0; i < dk; ++i) qq = std::fma(qr[i], qr[i], qq), kk = std::fma(kr[i], kr[i], kk);
  const float qinv = 1.f / std::sqrt(qq + 1e-6f) / std::sqrt(static_cast<float>(dk));
  const float kinv = 1.f / std::sqrt(kk + 1e-6f);
  for (int64_t i = 0; i < dk; ++i) q[i] = qr[i] * qinv, k[i] = kr[i] * kinv;
}

inline float log_decay(const DeltaPiece& c, int64_t t) {  // g = -exp(A_log) · softplus(a + dt_bias)
  const DeltaRuleParams& p = *c.params;
  return -std::exp(p.A_log[c.head]) * rowwise::softplus(c.ba[t * 2 * p.num_v_heads + p.num_v_heads + c.head] +
                                                         p.dt_bias[c.head]);
}
inline float beta_of(const DeltaPiece& c, int64_t t) {
  return rowwise::sigmoid(c.ba[t * 2 * c.params->num_v_heads + c.head]);
}

inline void copy_snapshot(const DeltaPiece& c, int64_t t, const float* S) {
  const DeltaRuleParams& p = *c.params;
  if (c.snapshot_slot[t] < 0) return;
  std::memcpy(c.state + c.snapshot_slot[t] * c.state_stride + c.head * p.k_dim * p.v_dim, S,
              static_cast<size_t>(p.k_dim * p.v_dim) * sizeof(float));
}

// Token by token: S ← decay·S;  delta = beta·(v − Sᵀk);  S ← S + k ⊗ delta;  o = Sᵀq.
// Two passes over the state per row: memory-bound on S, the right form for decode.
inline void recurrent_body(const DeltaPiece& c) {
  const DeltaRuleParams& p = *c.params;
  const int64_t dk = p.k_dim, dv = p.v_dim, Hk = p.num_k_heads, Hv = p.num_v_heads, kh = c.head / (Hv / Hk);
  thread_local std::vector<float> q, k, delta, o;
  q.resize(static_cast<size_t>(dk)), k.resize(static_cast<size_t>(dk));
  delta.resize(static_cast<size_t>(dv)), o.resize(static_cast<size_t>(dv));
  float* S = c.S;
  for (int64_t t = 0; t < c.n; ++t) {
    const float* row = c.qkv + t * c.qkv_stride;
    normalise_qk(row + kh * dk, row + Hk * dk + kh * dk, dk, q.data(), k.data());
    const float* vr = row + 2 * Hk * dk + c.head * dv;
    const float decay = std::exp(log_decay(c, t)), beta = beta_of(c, t);
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
    std::memcpy(c.out + t * Hv * dv, o.data(), static_cast<size_t>(dv) * sizeof(float));
    copy_snapshot(c, t, S);
  }
}

// C[r, j] += Σ_i A[r, i] · B[i, j] for r < m, j < n, i < k: each element one fma chain over i
// in order (the ISA files' gemm_acc computes exactly this, faster).
inline void gemm_acc_portable(int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const float* B,
                              int64_t ldb, float* C, int64_t ldc) {
  for (int64_t r = 0; r < m; ++r)
    for (int64_t i = 0; i < k; ++i) {
      const float a = A[r * lda + i];
      const float* b = B + i * ldb;
      float* cr = C + r * ldc;
      for (int64_t j = 0; j < n; ++j) cr[j] = std::fma(a, b[j], cr[j]);
    }
}

// One chunk of n rows from state S0 (the chunkwise-parallel form of Yang et al., "Gated Delta
// Networks", and HF's torch_chunk_gated_delta_rule). With G_t = Σ_{s≤t} g_s and γ_t = exp(G_t):
//   S_t = γ_t·S0 + Σ_{s≤t} exp(G_t − G_s)·k_s ⊗ u_s,  where the corrected values u solve the
//   unit-lower-triangular system  u_t + Σ_{s<t} β_t·exp(G_t − G_s)(k_t·k_s)·u_s = β_t(v_t − γ_t·S0ᵀk_t);
//   o_t = γ_t·S0ᵀq_t + Σ_{s≤t} exp(G_t − G_s)(q_t·k_s)·u_s.
// The state is read once per chunk (three small GEMMs) instead of twice per row. Each row's
// output and state depend only on S0 and the rows before it in the chunk.
template <class Gemm>
void chunked_body(const DeltaPiece& c, Gemm gemm_acc) {
  const DeltaRuleParams& p = *c.params;
  const int64_t dk = p.k_dim, dv = p.v_dim, Hk = p.num_k_heads, Hv = p.num_v_heads, kh = c.head / (Hv / Hk);
  const int64_t n = c.n;
  thread_local std::vector<float> X, KT, M, WQ, U, KD, E, G, beta;
  X.assign(static_cast<size_t>(2 * n * dk), 0.f);   // [2n, dk]: rows 0..n-1 k_t, rows n..2n-1 q_t
  KT.resize(static_cast<size_t>(dk * n));           // [dk, n] kᵀ
  M.assign(static_cast<size_t>(2 * n * n), 0.f);    // [2n, n]: k_t·k_s, then q_t·k_s
  WQ.assign(static_cast<size_t>(2 * n * dv), 0.f);  // [2n, dv]: S0ᵀk_t, then S0ᵀq_t
  U.resize(static_cast<size_t>(n * dv));            // [n, dv] corrected values u_t
  KD.resize(static_cast<size_t>(dk * n));           // [dk, n] kᵀ decayed to some row
  E.resize(static_cast<size_t>(n * n));             // [n, n] exp(G_t − G_s), s <= t
  G.resize(static_cast<size_t>(n)), beta.resize(static_cast<size_t>(n));
  float acc = 0.f;
  for (int64_t t = 0; t < n; ++t) {
    const float* row = c.qkv + t * c.qkv_stride;
    normalise_qk(row + kh * dk, row + Hk * dk + kh * dk, dk, X.data() + (n + t) * dk, X.data() + t * dk);
    G[t] = acc += log_decay(c, t);
    beta[t] = beta_of(c, t);
    for (int64_t i = 0; i < dk; ++i) KT[i * n + t] = X[t * dk + i];
  }
  for (int64_t t = 0; t < n; ++t)
    for (int64_t s = 0; s <= t; ++s) E[t * n + s] = std::exp(G[t] - G[s]);  // <= 1: g <= 0
  gemm_acc(2 * n, n, dk, X.data(), dk, KT.data(), n, M.data(), n);
  gemm_acc(2 * n, dv, dk, X.data(), dk, c.S, dv, WQ.data(), dv);
  // Forward substitution (the "UT transform"), one axpy per (t, s).
  for (int64_t t = 0; t < n; ++t) {
    const float* vr = c.qkv + t * c.qkv_stride + 2 * Hk * dk + c.head * dv;
    const float gt = std::exp(G[t]);
    float* ut = U.data() + t * dv;
    for (int64_t j = 0; j < dv; ++j) ut[j] = std::fma(-gt, WQ[t * dv + j], vr[j]) * beta[t];
    for (int64_t s = 0; s < t; ++s) {
      const float a = -beta[t] * E[t * n + s] * M[t * n + s];
      const float* us = U.data() + s * dv;
      for (int64_t j = 0; j < dv; ++j) ut[j] = std::fma(a, us[j], ut[j]);
    }
  }
  // Outputs: o_t = γ_t·S0ᵀq_t, then + P·U with P[t, s] = exp(G_t − G_s)(q_t·k_s) for s ≤ t, else 0.
  float* P = M.data();  // k·k is spent: reuse its rows for P
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t s = 0; s < n; ++s) P[t * n + s] = s <= t ? E[t * n + s] * M[(n + t) * n + s] : 0.f;
    const float gt = std::exp(G[t]);
    float* ot = c.out + t * Hv * dv;
    for (int64_t j = 0; j < dv; ++j) ot[j] = gt * WQ[(n + t) * dv + j];
  }
  for (int64_t t = 0; t < n; t += 4)  // P is lower triangular: row block [t, t + 4) needs s < t + 4
    gemm_acc(std::min<int64_t>(4, n - t), dv, std::min(n, t + 4), P + t * n, n, U.data(), dv, c.out + t * Hv * dv,
             Hv * dv);
  // States: snapshots inside the chunk first (they need S0), then the chunk's end in place.
  auto state_after = [&](int64_t r, float* dst) {  // dst = γ_r·S0 + Σ_{s≤r} exp(G_r − G_s)·k_s ⊗ u_s
    const float gr = std::exp(G[r]);
    for (int64_t i = 0; i < dk * dv; ++i) dst[i] = gr * c.S[i];
    const float* e = E.data() + r * n;
    for (int64_t i = 0; i < dk; ++i)
      for (int64_t s = 0; s <= r; ++s) KD[i * n + s] = KT[i * n + s] * e[s];
    gemm_acc(dk, dv, r + 1, KD.data(), n, U.data(), dv, dst, dv);
  };
  for (int64_t r = 0; r + 1 < n; ++r)
    if (c.snapshot_slot[r] >= 0) state_after(r, c.state + c.snapshot_slot[r] * c.state_stride + c.head * dk * dv);
  state_after(n - 1, c.S);  // reads S0 element i before writing element i: in place is safe
  copy_snapshot(c, n - 1, c.S);
}

}  // namespace
}  // namespace tachyon::kernels::cpu
