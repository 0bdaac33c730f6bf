// The CPU backend: AVX2/FMA/F16C kernels when the CPU has them (portable fallback
// otherwise), every op split over the global thread pool by output columns or rows, so
// a row's bits never depend on the batch or the thread count.
#pragma once

#include <utility>
#include <vector>

#include "kernels/cpu/isa/matmul_int8.h"
#include "kernels/reference/reference_backend.h"

namespace tachyon::kernels {

class CpuBackend : public ReferenceBackend {
 public:
  std::string name() const override;
  bool supports_kv_format(KvFormat) const override { return true; }
  // Matrices are repacked into Panel64 (see kernels/weight.h), quantized ones with their scales
  // (cpu/quant_pack.h); vectors are copied.
  Weight upload_weight(const Weight& host) override;
  // A drafter's matrices: int8 per row, Panel64 (half the bytes of bf16; the matmul kernels
  // reduce the int8 values and scale each output).
  Weight upload_draft_weight(const Weight& host) override;
  // A router's matrix packed as upload_weight packs it without the int8-activation mode:
  // router_logits reads its stored values in f32 ("cpu-bf16" overrides both, as CUDA rounds).
  Weight upload_router_weight(const Weight& host) override { return upload_packed(host); }
  void router_logits(const float* x, int64_t rows, const Weight& w, const Weight* bias, float* logits) override {
    CpuBackend::matmul(x, rows, w, bias, logits);
  }
  // The int8-activation mode (Backend::set_int8_activations): integer weights int8_dot_eligible
  // accepts are packed as Panel64Dot and their matmuls run cpu/isa/matmul_int8.h.
  bool supports_int8_activations() const override { return true; }
  int64_t int8_activation_weights() const override { return int8_dot_weights_; }
  NarrowedWeights f32_weights_stored_as_bf16() const override { return narrowed_f32_; }

  void embedding(const Weight& table, const int32_t* ids, int64_t rows, float scale, float* out) override;
  void top_two(const float* x, int64_t rows, int64_t n, TopTwo* out) override;  // cpu/top_two_row.h
  void rms_norm(const float* x, const Weight& w, int64_t rows, int64_t dim, float eps, float weight_offset,
                float* out) override;
  void matmul(const float* x, int64_t rows, const Weight& w, const Weight* bias, float* out) override;
  // The element- and row-wise steps between the matmuls, split over the pool by rows (the reference
  // backend runs them on the caller's thread alone); each row's operations are the reference's.
  void add(float* x, const float* y, int64_t n) override;
  void add_rms_norm(float* x, const float* y, const Weight& w, int64_t rows, int64_t dim, float eps,
                    float weight_offset, float* out) override;
  void copy_strided(const float* src, int64_t src_stride, int64_t rows, int64_t width, float* dst,
                    int64_t dst_stride) override;
  void write_kv(const float* k, const float* v, int64_t rows, const PagedKv& kv, const AttentionMeta& meta) override;
  // One pass per chunk of rows (q/k norms read from qkv, one cos/sin per position for q and k,
  // RoPE, cache write; v goes to the cache from qkv, its scratch is not written) instead of eight
  // ops, each reading the rows back from memory.
  void qkv_norm_rope_write_kv(const float* qkv, int64_t rows, const QkvPrologue& p, const PagedKv& kv,
                              const AttentionMeta& meta, float* q, float* k, float* v) override;
  void rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const RopeTable& table,
            const int32_t* positions) override;
  void gated_activation(const float* gate_up, int64_t rows, int64_t dim, Activation act, float* out) override;
  void attention(const float* q, int64_t rows, const PagedKv& kv, const AttentionMeta& meta,
                 const AttentionParams& params, float* out) override;
  void moe_route(const float* logits, int64_t rows, const MoeRoutingParams& params, int32_t* expert_ids,
                 float* weights) override;
  void moe_experts(const float* x, int64_t rows, const int32_t* expert_ids, const float* weights, int64_t top_k,
                   const MoeExperts& experts, float* out) override;
  void head_matmul(const float* x, int64_t rows, int64_t heads, int64_t x_row_stride, int64_t x_head_stride,
                   const Weight& w, float* out, int64_t out_row_stride, int64_t out_head_stride) override;
  void gate_multiply(float* x, int64_t rows, int64_t dim, const float* gate, int64_t gate_stride,
                     int64_t group, GateFn fn) override;
  void causal_conv1d_silu(const float* x, int64_t rows, int64_t channels, const Weight& w, const RecurrentMeta& meta,
                          float* state, int64_t state_stride, float* out) override;
  void gated_delta_rule(const float* qkv, int64_t qkv_stride, const float* ba, int64_t rows,
                        const DeltaRuleParams& params, const RecurrentMeta& meta, float* state, int64_t state_stride,
                        float* out) override;

 protected:
  // Called on the matmul inputs this backend builds itself (moe_experts' gathered rows and expert
  // activations, [n] f32) just before the product: the identity here; "cpu-bf16" rounds them
  // (cpu_bf16_backend.h).
  virtual void round_matmul_input(float* /*x*/, int64_t /*n*/) {}

 private:
  Weight upload_packed(const Weight& host);  // Panel64, quantized ones with their scales; vectors copied
  Weight upload_quantized(const Weight& host);
  Weight upload_int8_dot(const Weight& host);
  // The int8-activation matmul (Panel64Dot weights) of rows already quantized.
  void matmul_int8(const cpu::Int8Rows& a, const Weight& w, const Weight* bias, float* out);
  cpu::Int8Activations int8_x_;  // matmul's quantized input rows, grow-only
  int64_t int8_dot_weights_ = 0;  // weights uploaded as Panel64Dot
  NarrowedWeights narrowed_f32_;  // F32 matrices upload_packed stored as bf16 (all values bf16)
  // attention's work units, [first row, end row) of each run of one sequence's rows (reused: no
  // allocation per layer and step once its capacity holds the batch).
  std::vector<std::pair<int64_t, int64_t>> attention_runs_;
  // moe_experts scratch (host memory is device memory here), grow-only.
  std::vector<float> moe_x_, moe_gate_up_, moe_act_, moe_y_;
  std::vector<int32_t> moe_count_, moe_by_expert_, moe_fill_;
  std::vector<std::pair<int32_t, int32_t>> moe_items_;
  cpu::Int8Activations moe_int8_;  // moe_experts' rows quantized for Panel64Dot experts
};

}  // namespace tachyon::kernels
