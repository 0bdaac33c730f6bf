#include "kernels/cpu/cpu_bf16_backend.h"

#include "base/dtype.h"
#include "base/thread_pool.h"
#include "kernels/cpu/tf32_chunk_attention.h"
#include "kernels/reference/rowwise.h"

namespace tachyon::kernels {

Weight CpuBf16Backend::upload_weight(const Weight& host) {
  // Quantized and int8 weights stay as they are: their f32 values (kernels/weight_dequant.h)
  // are the weights, and rounding them to bf16 would change the model (only the matmul
  // inputs are rounded here).
  if (host.rows <= 1 || host.dtype == DType::BF16 || host.quantized() || host.dtype == DType::I8)
    return CpuBackend::upload_weight(host);
  // CUDA packs every matrix as bf16 (f32 and f16 checkpoints included).
  std::vector<uint16_t> bf16(static_cast<size_t>(host.rows * host.cols));
  for (int64_t r = 0; r < host.rows; ++r)
    for (int64_t c = 0; c < host.cols; ++c) bf16[r * host.cols + c] = f32_to_bf16(rowwise::load_weight(host, r, c));
  Weight w = host;
  w.data = bf16.data();
  w.dtype = DType::BF16;
  return CpuBackend::upload_weight(w);  // copies
}

void CpuBf16Backend::round_matmul_input(float* x, int64_t n) {
  ThreadPool::global().parallel_for(static_cast<size_t>(n), [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) x[i] = round_to_bf16(x[i]);
  }, 4096);
}

void CpuBf16Backend::matmul(const float* x, int64_t rows, const Weight& w, const Weight* bias, float* out) {
  x_bf16_.assign(x, x + rows * w.cols);
  round_matmul_input(x_bf16_.data(), rows * w.cols);
  if (w.rows == 1 && w.dtype != DType::BF16) {  // a vector used as a [1, k] matrix (CUDA: packed_row)
    row_weight_.resize(static_cast<size_t>(w.cols));
    for (int64_t c = 0; c < w.cols; ++c) row_weight_[c] = round_to_bf16(rowwise::load_weight(w, c));
    const Weight rounded{row_weight_.data(), DType::F32, 1, w.cols};
    CpuBackend::matmul(x_bf16_.data(), rows, rounded, bias, out);
    return;
  }
  CpuBackend::matmul(x_bf16_.data(), rows, w, bias, out);
}

void CpuBf16Backend::head_matmul(const float* x, int64_t rows, int64_t heads, int64_t xrs, int64_t xhs,
                                 const Weight& w, float* out, int64_t ors, int64_t ohs) {
  const int64_t k = w.cols;
  x_bf16_.resize(static_cast<size_t>(rows * heads * k));  // [rows, heads, k]
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < k; ++i) x_bf16_[(r * heads + h) * k + i] = round_to_bf16(x[r * xrs + h * xhs + i]);
  CpuBackend::head_matmul(x_bf16_.data(), rows, heads, heads * k, k, w, out, ors, ohs);
}

void CpuBf16Backend::attention(const float* q, int64_t rows, const PagedKv& kv, const AttentionMeta& meta,
                               const AttentionParams& p, float* out) {
  cpu::attention_tf32_chunks(q, rows, kv, meta, p, out, attention_);
}

}  // namespace tachyon::kernels
