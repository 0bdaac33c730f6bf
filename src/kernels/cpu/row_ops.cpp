// The CPU backend's element- and row-wise steps between the matmuls: RMSNorm (alone and after
// the residual add), the gated activation, the residual add, column splits, and the attention prologue (q/k split,
// per-head norms, RoPE, cache write). Each is split over the pool by rows; every row goes through
// the reference backend's operations in the reference's order (kernels/reference/rowwise.h), so
// the bits do not depend on the thread split. At a 512-token prefill these steps ran on the
// caller's thread alone while the other core waited (~10% of the int8-activation prefill's wall
// time, docs/perf/cpu.md).
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/reference/rowwise.h"

namespace tachyon::kernels {

namespace {
ThreadPool& pool() { return ThreadPool::global(); }

// weight_offset + w[i] for i < dim: a norm's weights decoded once per call, not once per element.
void norm_scale(const Weight& w, int64_t dim, float weight_offset, std::vector<float>& scale) {
  scale.resize(static_cast<size_t>(dim));
  for (int64_t i = 0; i < dim; ++i) scale[static_cast<size_t>(i)] = weight_offset + rowwise::load_weight(w, i);
}

// rowwise::rms_norm_row over rows [b, e) of x into out (row stride dim; out may be x), with the
// weights from norm_scale, restructured: four rows' sums of squares interleaved (each one
// sequential chain, the canonical order) and the scaling vectorised (this file is built with
// -O3; o is xr or apart from it, so no overlap check is needed). Same operations per row.
void rms_norm_scaled(const float* x, const float* scale, size_t b, size_t e, int64_t dim, float eps, float* out) {
  auto normalize = [&](const float* xr, float sum, float* o) {
    const float inv = 1.f / std::sqrt(sum / static_cast<float>(dim) + eps);
#pragma GCC ivdep
    for (int64_t i = 0; i < dim; ++i) o[i] = scale[i] * (xr[i] * inv);
  };
  size_t r = b;
  for (; r + 4 <= e; r += 4) {
    const float* xr[4] = {x + r * dim, x + (r + 1) * dim, x + (r + 2) * dim, x + (r + 3) * dim};
    float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
    for (int64_t i = 0; i < dim; ++i) {
      s0 += xr[0][i] * xr[0][i];
      s1 += xr[1][i] * xr[1][i];
      s2 += xr[2][i] * xr[2][i];
      s3 += xr[3][i] * xr[3][i];
    }
    const float sums[4] = {s0, s1, s2, s3};
    for (int j = 0; j < 4; ++j) normalize(xr[j], sums[j], out + (r + j) * dim);
  }
  for (; r < e; ++r) {
    const float* xr = x + r * dim;
    float sum = 0.f;
    for (int64_t i = 0; i < dim; ++i) sum += xr[i] * xr[i];
    normalize(xr, sum, out + r * dim);
  }
}

// A small batch (a verify step's rows, one row's per-head q/k norms) runs on one thread.
void rms_norm_rows(const float* x, const Weight& w, size_t b, size_t e, int64_t dim, float eps, float weight_offset,
                   float* out) {
  thread_local std::vector<float> scale;
  norm_scale(w, dim, weight_offset, scale);
  rms_norm_scaled(x, scale.data(), b, e, dim, eps, out);
}

// rowwise::rope_row for one position, the cos and sin computed once for every head of q and k
// (rotate-half tables; interleaved ones take rope_row itself): the same products and sums per
// element, over i in a loop that vectorises.
struct RopeAngles {
  std::vector<float> c, s;  // [rotary_dim / 2]
  void at(const RopeTable& t, int32_t position) {
    const int64_t half = t.rotary_dim / 2;
    c.resize(static_cast<size_t>(half));
    s.resize(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i) {
      const float freq = static_cast<float>(position) * t.inv_freq[static_cast<size_t>(i)];
      c[static_cast<size_t>(i)] = std::cos(freq) * t.attention_scaling;
      s[static_cast<size_t>(i)] = std::sin(freq) * t.attention_scaling;
    }
  }
  void rotate(float* x, int64_t heads, int64_t head_dim, const RopeTable& t, int32_t position) const {
    if (t.interleaved) return rowwise::rope_row(x, heads, head_dim, t, position);
    const int64_t half = t.rotary_dim / 2;
    const float* cs = c.data();
    const float* sn = s.data();
    for (int64_t h = 0; h < heads; ++h) {
      float* xa = x + h * head_dim + t.offset;
      float* xb = xa + half;
#pragma GCC ivdep
      for (int64_t i = 0; i < half; ++i) {
        const float x1 = xa[i], x2 = xb[i];
        xa[i] = x1 * cs[i] + (-x2) * sn[i];
        xb[i] = x2 * cs[i] + x1 * sn[i];
      }
    }
  }
};

// rowwise::gated_activation_row, SiLU in two passes over a span: the exponentials (the library
// call each), then silu(g) · up = g / (1 + e^-g) · up element-wise, which vectorises (one call,
// a divide and a multiply per element in one scalar loop were ~2/3 of the op's time). Same
// operations per element.
void gated_rows(const float* gate_up, size_t b, size_t e, int64_t dim, Activation act, float* out) {
  if (act != Activation::SiLU) {
    for (size_t r = b; r < e; ++r) rowwise::gated_activation_row(gate_up + r * 2 * dim, dim, act, out + r * dim);
    return;
  }
  constexpr int64_t kSpan = 256;
  float ex[kSpan];
  for (size_t r = b; r < e; ++r) {
    const float* g = gate_up + r * 2 * dim;
    const float* up = g + dim;
    float* o = out + r * dim;
    for (int64_t i0 = 0; i0 < dim; i0 += kSpan) {
      const int64_t n = std::min(kSpan, dim - i0);
      for (int64_t i = 0; i < n; ++i) ex[i] = std::exp(-g[i0 + i]);
#pragma GCC ivdep
      for (int64_t i = 0; i < n; ++i) o[i0 + i] = g[i0 + i] / (1.f + ex[i]) * up[i0 + i];
    }
  }
}

void copy_rows(const float* src, int64_t src_stride, size_t b, size_t e, int64_t width, float* dst, int64_t dst_stride) {
  for (size_t r = b; r < e; ++r) std::copy(src + r * src_stride, src + r * src_stride + width, dst + r * dst_stride);
}
}  // namespace

void CpuBackend::rms_norm(const float* x, const Weight& w, int64_t rows, int64_t dim, float eps, float weight_offset,
                          float* out) {
  pool().parallel_for(rows, [&](size_t b, size_t e) { rms_norm_rows(x, w, b, e, dim, eps, weight_offset, out); }, 16);
}

void CpuBackend::gated_activation(const float* gate_up, int64_t rows, int64_t dim, Activation act, float* out) {
  pool().parallel_for(rows, [&](size_t b, size_t e) { gated_rows(gate_up, b, e, dim, act, out); }, 4);
}

void CpuBackend::add(float* x, const float* y, int64_t n) {
  constexpr size_t kChunk = 4096;  // elements a thread takes at least (a decode row's add stays on one)
  pool().parallel_for((static_cast<size_t>(n) + kChunk - 1) / kChunk, [&](size_t b, size_t e) {
    const size_t end = std::min(static_cast<size_t>(n), e * kChunk);
    for (size_t i = b * kChunk; i < end; ++i) x[i] += y[i];
  }, 4);
}

void CpuBackend::add_rms_norm(float* x, const float* y, const Weight& w, int64_t rows, int64_t dim, float eps,
                              float weight_offset, float* out) {
  pool().parallel_for(rows, [&](size_t b, size_t e) {
    for (size_t i = b * dim; i < e * dim; ++i) x[i] += y[i];
    rms_norm_rows(x, w, b, e, dim, eps, weight_offset, out);
  }, 16);
}

void CpuBackend::copy_strided(const float* src, int64_t src_stride, int64_t rows, int64_t width, float* dst,
                              int64_t dst_stride) {
  pool().parallel_for(rows, [&](size_t b, size_t e) { copy_rows(src, src_stride, b, e, width, dst, dst_stride); }, 16);
}

void CpuBackend::write_kv(const float* k, const float* v, int64_t rows, const PagedKv& kv, const AttentionMeta& meta) {
  pool().parallel_for(rows, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) rowwise::write_kv_row(k, v, kv, meta, static_cast<int64_t>(r));
  }, 16);
}

void CpuBackend::qkv_norm_rope_write_kv(const float* qkv, int64_t rows, const QkvPrologue& p, const PagedKv& kv,
                                        const AttentionMeta& meta, float* q, float* k, float* /*v*/) {
  const int64_t d = kv.head_dim, hq = p.num_heads, hk = kv.num_kv_heads;
  const int64_t q_dim = hq * d, kv_dim = hk * d, stride = q_dim + 2 * kv_dim;
  const KvTensorLayout kl = kv.k_layout(), vl = kv.v_layout();
  // Per row: q's heads normed (or copied) from qkv into q and rotated; k's likewise into the k
  // scratch, then encoded into the cache with v's heads read from qkv where they are.
  pool().parallel_for(rows, [&](size_t b, size_t e) {
    thread_local std::vector<float> q_scale, k_scale;
    thread_local RopeAngles angles;
    if (p.q_norm) norm_scale(*p.q_norm, d, p.weight_offset, q_scale);
    if (p.k_norm) norm_scale(*p.k_norm, d, p.weight_offset, k_scale);
    for (size_t r = b; r < e; ++r) {
      const float* src = qkv + r * stride;
      float* qr = q + r * q_dim;
      float* kr = k + r * kv_dim;
      if (p.q_norm) rms_norm_scaled(src, q_scale.data(), 0, static_cast<size_t>(hq), d, p.eps, qr);
      else std::copy(src, src + q_dim, qr);
      if (p.k_norm) rms_norm_scaled(src + q_dim, k_scale.data(), 0, static_cast<size_t>(hk), d, p.eps, kr);
      else std::copy(src + q_dim, src + q_dim + kv_dim, kr);
      const int32_t position = p.positions[r];
      if (!p.rope->interleaved) angles.at(*p.rope, position);
      angles.rotate(qr, hq, d, *p.rope, position);
      angles.rotate(kr, hk, d, *p.rope, position);
      const int64_t slot = rowwise::kv_slot(kv, meta, static_cast<int64_t>(r), meta.positions[r]);
      for (int64_t h = 0; h < hk; ++h) {
        rowwise::write_kv_head(kr + h * d, kl, kv.k, slot, h, d);
        rowwise::write_kv_head(src + q_dim + kv_dim + h * d, vl, kv.v, slot, h, d);
      }
    }
  }, 4);
}

}  // namespace tachyon::kernels
