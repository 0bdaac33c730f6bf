#include "kernels/reference/reference_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "base/error.h"
#include "base/host_buffer.h"
#include "kernels/quantize.h"
#include "kernels/reference/rowwise.h"

namespace tachyon::kernels {

void* ReferenceBackend::allocate(size_t bytes) { return host_buffer_allocate(bytes); }
void ReferenceBackend::deallocate(void* ptr) { host_buffer_free(ptr); }
ReferenceBackend::~ReferenceBackend() {
  for (void* p : owned_) host_buffer_free(p);
}

void* ReferenceBackend::own_copy(const void* src, size_t bytes) {
  void* copy = allocate(bytes);
  std::memcpy(copy, src, bytes);
  owned_.push_back(copy);
  return copy;
}

Weight ReferenceBackend::upload_weight(const Weight& host) {
  TACHYON_CHECK(host.layout == WeightLayout::RowMajor, "weights arrive row-major");
  Weight w = host;
  if (host.quantized()) {  // codes, scales and biases: the host buffers are transient
    check_quantized_weight(host);
    const size_t scale_bytes = static_cast<size_t>(quant_scale_count(host)) * dtype_size(host.quant.scale_dtype);
    w.data = own_copy(host.data, static_cast<size_t>(quant_code_bytes(host)));
    w.quant.scales = own_copy(host.quant.scales, scale_bytes);
    if (host.quant.biases) w.quant.biases = own_copy(host.quant.biases, scale_bytes);
    return w;
  }
  w.data = own_copy(host.data, static_cast<size_t>(host.rows * host.cols) * dtype_size(host.dtype));
  if (host.scales) w.scales = static_cast<const float*>(own_copy(host.scales, static_cast<size_t>(host.rows) * sizeof(float)));
  return w;
}

void ReferenceBackend::copy_to_host(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void ReferenceBackend::copy_to_device(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void ReferenceBackend::copy_on_device(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

void ReferenceBackend::embedding(const Weight& table, const int32_t* ids, int64_t rows, float scale, float* out) {
  if (for_each_row_kind(rows, table, [&](int64_t first, int64_t n, bool decode) {
        ReferenceBackend::embedding(table.of_kind(decode), ids + first, n, scale, out + first * table.cols);
      }))
    return;
  for (int64_t r = 0; r < rows; ++r) rowwise::embedding_row(table, ids[r], scale, out + r * table.cols);
}

void ReferenceBackend::rms_norm(const float* x, const Weight& w, int64_t rows, int64_t dim, float eps,
                                float weight_offset, float* out) {
  for (int64_t r = 0; r < rows; ++r) rowwise::rms_norm_row(x + r * dim, w, dim, eps, weight_offset, out + r * dim);
}

void ReferenceBackend::matmul(const float* x, int64_t rows, const Weight& w, const Weight* bias, float* out) {
  if (for_each_row_kind(rows, w, [&](int64_t first, int64_t n, bool decode) {
        ReferenceBackend::matmul(x + first * w.cols, n, w.of_kind(decode), bias, out + first * w.rows);
      }))
    return;
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t n = 0; n < w.rows; ++n) {
      double acc = 0;  // the oracle reduces in double: a different order than every fast kernel
      for (int64_t k = 0; k < w.cols; ++k) acc += double(x[m * w.cols + k]) * rowwise::load_weight(w, n, k);
      if (bias && !bias->empty()) acc += rowwise::load_weight(*bias, n);
      out[m * w.rows + n] = static_cast<float>(acc);
    }
}

void ReferenceBackend::rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const RopeTable& table,
                            const int32_t* positions) {
  for (int64_t r = 0; r < rows; ++r) rowwise::rope_row(x + r * heads * head_dim, heads, head_dim, table, positions[r]);
}

void ReferenceBackend::gated_activation(const float* gate_up, int64_t rows, int64_t dim, Activation act, float* out) {
  for (int64_t r = 0; r < rows; ++r) rowwise::gated_activation_row(gate_up + r * 2 * dim, dim, act, out + r * dim);
}

void ReferenceBackend::gather_rows(const float* src, const int32_t* rows, int64_t n, int64_t width, float* dst) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * width, src + rows[i] * width, width * sizeof(float));
}

void ReferenceBackend::add(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void ReferenceBackend::write_kv(const float* k, const float* v, int64_t rows, const PagedKv& kv,
                                const AttentionMeta& meta) {
  for (int64_t r = 0; r < rows; ++r) rowwise::write_kv_row(k, v, kv, meta, r);
}

void ReferenceBackend::attention(const float* q, int64_t rows, const PagedKv& kv, const AttentionMeta& meta,
                                 const AttentionParams& p, float* out) {
  const int64_t d = kv.head_dim, group = p.num_heads / kv.num_kv_heads;
  const KvTensorLayout kl = kv.k_layout(), vl = kv.v_layout();
  std::vector<float> kbuf(d), vbuf(d), qrot(d);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t pos = meta.positions[r];
    const int32_t lo = p.sliding_window > 0 ? std::max<int32_t>(0, pos - static_cast<int32_t>(p.sliding_window) + 1) : 0;
    for (int64_t h = 0; h < p.num_heads; ++h) {
      const float* qh = q + (r * p.num_heads + h) * d;
      if (kv_format_rotates_keys(kv.format)) {  // keys are stored rotated: q·k = Hq·Hk
        turbo_rotate(qh, d, qrot.data());
        qh = qrot.data();
      }
      const int64_t kvh = h / group;
      std::vector<double> scores;
      for (int32_t j = lo; j <= pos; ++j) {
        const float* kj = rowwise::read_kv_head(kl, kv.k, rowwise::kv_slot(kv, meta, r, j), kvh, d, kbuf.data());
        double s = 0;
        for (int64_t i = 0; i < d; ++i) s += double(qh[i]) * kj[i];
        s *= p.scale;
        if (p.softcap > 0) s = p.softcap * std::tanh(s / p.softcap);
        scores.push_back(s);
      }
      double mx = p.sinks ? p.sinks[h] : -std::numeric_limits<double>::infinity();
      for (double s : scores) mx = std::max(mx, s);
      double sum = p.sinks ? std::exp(p.sinks[h] - mx) : 0;
      for (double& s : scores) sum += (s = std::exp(s - mx));
      std::vector<double> acc(static_cast<size_t>(d), 0.0);
      for (int32_t j = lo; j <= pos; ++j) {
        const float* vj = rowwise::read_kv_head(vl, kv.v, rowwise::kv_slot(kv, meta, r, j), kvh, d, vbuf.data());
        for (int64_t i = 0; i < d; ++i) acc[i] += scores[j - lo] * vj[i];
      }
      float* oh = out + (r * p.num_heads + h) * d;
      for (int64_t i = 0; i < d; ++i) oh[i] = static_cast<float>(acc[i] / sum);
    }
  }
}

}  // namespace tachyon::kernels
