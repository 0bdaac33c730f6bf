// "cpu-bf16": the CPU backend with the CUDA backend's bf16 rounding, a CPU oracle for what the
// GPU computes. The CUDA matmuls multiply bf16 operands with f32 accumulation: each matmul input
// row is rounded to bf16 (round to nearest even, __floats2bfloat162_rn in pack_bf16x2) as it is
// loaded, and every weight matrix is stored in bf16. This backend rounds the same values at the
// same places and otherwise runs the "cpu" kernels unchanged:
//   matmul, head_matmul      x rounded into a scratch buffer, then the CPU op
//   moe_experts              the gathered rows (gate_up input) and the expert activations
//                            (down input) rounded (CpuBackend::round_matmul_input)
//   upload_weight            matrices (rows > 1: linear layers, embeddings, conv kernels) stored
//                            as bf16; vectors (norms, biases, sinks) stay as they are, as on CUDA
//                            where they become f32; a [1, k] matmul weight is rounded when used;
//                            quantized and int8 matrices keep their format (their exact f32
//                            values are the weights; only the inputs are rounded)
//   attention                the CUDA kernels' chunked reduction with q, k, p and v rounded to
//                            tf32, or bf16 in a TACHYON_ATTENTION_BF16 build (cpu/tf32_chunk_attention.h)
// Everything else (norms, the KV cache, routing, activations, the recurrent ops, the embedding
// lookup's scale) stays f32 on both backends; the router logits are a bf16 matmul on both.
//
//   auto gpu_like = make_backend("cpu-bf16");  // then load a model on it like on "cpu"
//
// Its logits match the CUDA backend's up to f32 summation order, which is what the CUDA golden
// test relies on where bf16 rounding moves a model away from transformers' float32 logits
// (tests/diff/hf/golden_device.h).
#pragma once

#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/tf32_chunk_attention.h"

namespace tachyon::kernels {

class CpuBf16Backend final : public CpuBackend {
 public:
  // attention: the operand format of the attention MMAs, by default the CUDA build's.
  explicit CpuBf16Backend(cpu::AttentionOperands attention = cpu::kCudaAttentionOperands) : attention_(attention) {}
  std::string name() const override { return "cpu-bf16"; }
  Weight upload_weight(const Weight& host) override;
  void matmul(const float* x, int64_t rows, const Weight& w, const Weight* bias, float* out) override;
  // The router as the CUDA backend computes it: one more bf16 matmul.
  Weight upload_router_weight(const Weight& host) override { return upload_weight(host); }
  void router_logits(const float* x, int64_t rows, const Weight& w, const Weight* bias, float* logits) override {
    matmul(x, rows, w, bias, logits);
  }
  void head_matmul(const float* x, int64_t rows, int64_t heads, int64_t x_row_stride, int64_t x_head_stride,
                   const Weight& w, float* out, int64_t out_row_stride, int64_t out_head_stride) override;
  void attention(const float* q, int64_t rows, const PagedKv& kv, const AttentionMeta& meta,
                 const AttentionParams& p, float* out) override;

 protected:
  void round_matmul_input(float* x, int64_t n) override;

 private:
  std::vector<float> x_bf16_;       // [rows, k] rounded matmul input, grow-only
  std::vector<float> row_weight_;   // a [1, k] matmul weight rounded to bf16
  cpu::AttentionOperands attention_;
};

}  // namespace tachyon::kernels
