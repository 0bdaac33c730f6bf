// The CPU backend: AVX2/FMA/F16C kernels when the CPU has them (portable fallback
// otherwise), every op split over the global thread pool by output columns or rows, so
// a row's bits never depend on the batch or the thread count.
#pragma once

#include "kernels/reference/reference_backend.h"

namespace tachyon::kernels {

class CpuBackend : public ReferenceBackend {
 public:
  std::string name() const override;
  // Matrices are repacked into Panel64 (see kernels/weight.h); vectors are copied.
  Weight upload_weight(const Weight& host) override;

  void embedding(const Weight& table, const int32_t* ids, int64_t rows, float scale, float* out) override;
  void rms_norm(const float* x, const Weight& w, int64_t rows, int64_t dim, float eps, float weight_offset,
                float* out) override;
  void matmul(const float* x, int64_t rows, const Weight& w, const Weight* bias, float* out) override;
  void rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const RopeTable& table,
            const int32_t* positions) override;
  void gated_activation(const float* gate_up, int64_t rows, int64_t dim, Activation act, float* out) override;
  void attention(const float* q, int64_t rows, const PagedKv& kv, const AttentionMeta& meta,
                 const AttentionParams& params, float* out) override;
};

}  // namespace tachyon::kernels
