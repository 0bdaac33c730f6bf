// The CPU backend's element- and row-wise steps between the matmuls: RMSNorm (alone and after
// the residual add), the residual add, column splits, and the attention prologue (q/k split,
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

// rowwise::rms_norm_row over rows [b, e), restructured: the weights (plus offset) are decoded
// once per call instead of once per element, and four rows' sums of squares are interleaved:
// each sum is one sequential chain (the canonical order), and a small batch (a verify step's
// rows, one row's per-head q/k norms) runs on one thread. Same operations per row.
void rms_norm_rows(const float* x, const Weight& w, size_t b, size_t e, int64_t dim, float eps, float weight_offset,
                   float* out) {
  thread_local std::vector<float> scale;  // [dim] weight_offset + w
  scale.resize(static_cast<size_t>(dim));
  for (int64_t i = 0; i < dim; ++i) scale[i] = weight_offset + rowwise::load_weight(w, i);
  auto normalize = [&](const float* xr, float sum, float* o) {
    const float inv = 1.f / std::sqrt(sum / static_cast<float>(dim) + eps);
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

void copy_rows(const float* src, int64_t src_stride, size_t b, size_t e, int64_t width, float* dst, int64_t dst_stride) {
  for (size_t r = b; r < e; ++r) std::copy(src + r * src_stride, src + r * src_stride + width, dst + r * dst_stride);
}
}  // namespace

void CpuBackend::rms_norm(const float* x, const Weight& w, int64_t rows, int64_t dim, float eps, float weight_offset,
                          float* out) {
  pool().parallel_for(rows, [&](size_t b, size_t e) { rms_norm_rows(x, w, b, e, dim, eps, weight_offset, out); }, 16);
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
                                        const AttentionMeta& meta, float* q, float* k, float* v) {
  const int64_t d = kv.head_dim, hq = p.num_heads, hk = kv.num_kv_heads;
  const int64_t q_dim = hq * d, kv_dim = hk * d, stride = q_dim + 2 * kv_dim;
  pool().parallel_for(rows, [&](size_t b, size_t e) {
    copy_rows(qkv, stride, b, e, q_dim, q, q_dim);
    copy_rows(qkv + q_dim, stride, b, e, kv_dim, k, kv_dim);
    copy_rows(qkv + q_dim + kv_dim, stride, b, e, kv_dim, v, kv_dim);
    if (p.q_norm) rms_norm_rows(q, *p.q_norm, b * hq, e * hq, d, p.eps, p.weight_offset, q);
    if (p.k_norm) rms_norm_rows(k, *p.k_norm, b * hk, e * hk, d, p.eps, p.weight_offset, k);
    for (size_t r = b; r < e; ++r) {
      rowwise::rope_row(q + r * q_dim, hq, d, *p.rope, p.positions[r]);
      rowwise::rope_row(k + r * kv_dim, hk, d, *p.rope, p.positions[r]);
      rowwise::write_kv_row(k, v, kv, meta, static_cast<int64_t>(r));
    }
  }, 4);
}

}  // namespace tachyon::kernels
