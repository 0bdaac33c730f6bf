// The scalar oracle: every op written the obvious way, single-threaded. Slow; used by
// kernel tests as the reference every other backend is compared with.
#pragma once

#include <algorithm>
#include <vector>

#include "kernels/backend.h"

namespace tachyon::kernels {

class ReferenceBackend : public Backend {
 public:
  std::string name() const override { return "reference"; }
  bool supports_kv_format(KvFormat) const override { return true; }
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr) override;
  ~ReferenceBackend() override;
  // Copies the weight into backend memory (row-major); the backend owns it until destroyed.
  Weight upload_weight(const Weight& host) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  void copy_to_device(void* dst, const void* src, size_t bytes) override;
  void copy_on_device(void* dst, const void* src, size_t bytes) override;

  void embedding(const Weight& table, const int32_t* ids, int64_t rows, float scale, float* out) override;
  // Device memory is host memory here: no round trip through copies (a drafter's every level).
  // An id outside the table reads row 0, as Backend::embedding_device_ids says.
  void embedding_device_ids(const Weight& table, const int32_t* ids, int64_t rows, float scale, float* out) override {
    const auto outside = [&](int32_t id) { return id < 0 || id >= table.rows; };
    if (std::none_of(ids, ids + rows, outside)) return embedding(table, ids, rows, scale, out);
    std::vector<int32_t> valid(ids, ids + rows);
    for (int32_t& id : valid)
      if (outside(id)) id = 0;
    embedding(table, valid.data(), rows, scale, out);
  }
  void top_two(const float* x, int64_t rows, int64_t n, TopTwo* out) override {
    for (int64_t r = 0; r < rows; ++r) out[r] = top_two_of_row(x + r * n, n);
  }
  void rms_norm(const float* x, const Weight& w, int64_t rows, int64_t dim, float eps, float weight_offset,
                float* out) override;
  void matmul(const float* x, int64_t rows, const Weight& w, const Weight* bias, float* out) override;
  void rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const RopeTable& table,
            const int32_t* positions) override;
  void gated_activation(const float* gate_up, int64_t rows, int64_t dim, Activation act, float* out) override;
  void gather_rows(const float* src, const int32_t* rows, int64_t n, int64_t width, float* dst) override;
  void add(float* x, const float* y, int64_t n) override;
  void write_kv(const float* k, const float* v, int64_t rows, const PagedKv& kv, const AttentionMeta& meta) override;
  void attention(const float* q, int64_t rows, const PagedKv& kv, const AttentionMeta& meta,
                 const AttentionParams& params, float* out) override;
  void moe_route(const float* logits, int64_t rows, const MoeRoutingParams& params, int32_t* expert_ids,
                 float* weights) override;
  void moe_experts(const float* x, int64_t rows, const int32_t* expert_ids, const float* weights, int64_t top_k,
                   const MoeExperts& experts, float* out) override;
  void head_matmul(const float* x, int64_t rows, int64_t heads, int64_t x_row_stride, int64_t x_head_stride,
                   const Weight& w, float* out, int64_t out_row_stride, int64_t out_head_stride) override;
  void copy_strided(const float* src, int64_t src_stride, int64_t rows, int64_t width, float* dst,
                    int64_t dst_stride) override;
  void gate_multiply(float* x, int64_t rows, int64_t dim, const float* gate, int64_t gate_stride,
                     int64_t group, GateFn fn) override;
  void causal_conv1d_silu(const float* x, int64_t rows, int64_t channels, const Weight& w, const RecurrentMeta& meta,
                          float* state, int64_t state_stride, float* out) override;
  void gated_delta_rule(const float* qkv, int64_t qkv_stride, const float* ba, int64_t rows,
                        const DeltaRuleParams& params, const RecurrentMeta& meta, float* state, int64_t state_stride,
                        float* out) override;

 protected:
  // A backend-owned copy of `bytes` host bytes (freed with the backend).
  void* own_copy(const void* src, size_t bytes);
  std::vector<void*> owned_;
};

}  // namespace tachyon::kernels
