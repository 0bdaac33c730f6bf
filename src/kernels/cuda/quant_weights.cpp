// The CUDA backend's quantized weights (kernels/weight.h formats; layout and arithmetic in
// quant_layout.h): upload, matmul dispatch (decode kernel or a bf16 copy through the prefill
// GEMM), and MoE experts.
#include <vector>

#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/quant_pack.h"
#include "kernels/weight_dequant.h"

namespace tachyon::kernels::cuda {

Weight CudaBackend::upload_quant_weight(const Weight& host) {
  if (host.rows <= 1) {  // a vector (bias, norm): f32 like every other vector
    std::vector<float> f(static_cast<size_t>(host.cols));
    for (int64_t c = 0; c < host.cols; ++c)
      f[static_cast<size_t>(c)] = host.quantized()
                                      ? dequantize_element(host, 0, c)
                                      : static_cast<float>(static_cast<const int8_t*>(host.data)[c]) * host.scales[0];
    return upload_weight(Weight{f.data(), DType::F32, host.rows, host.cols});
  }
  const QuantHostCopy packed = pack_quant_weight(host);
  const auto to_device = [&](const void* bytes, size_t n) -> void* {
    if (n == 0) return nullptr;
    void* d = allocate(n);
    TACHYON_CUDA_CHECK(cudaMemcpyAsync(d, bytes, n, cudaMemcpyHostToDevice, stream_));
    owned_.push_back(d);
    return d;
  };
  Weight w = host;
  w.layout = WeightLayout::QuantFragments;
  w.data = to_device(packed.codes.data(), packed.codes.size());
  w.quant.group = static_cast<int32_t>(packed.layout.group);
  w.quant.scale_dtype = quant_scale_dtype(packed.layout.scale_type);
  w.quant.scales = to_device(packed.scales.data(), packed.scales.size());
  w.quant.biases = to_device(packed.biases.data(), packed.biases.size());
  w.scales = static_cast<const float*>(to_device(packed.row_scales.data(), packed.row_scales.size() * sizeof(float)));
  if (host.format == WeightFormat::Fp8Block) w.quant.bits = 8;
  if (host.format == WeightFormat::Mxfp4) w.quant.bits = 4;
  if (packed.layout.bf16_pairs) bf16_pair_codes_.insert(w.data);
  TACHYON_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the host copies are freed on return
  return w;
}

QuantMatrix CudaBackend::quant_matrix(const Weight& w) const {
  TACHYON_CHECK(w.layout == WeightLayout::QuantFragments, "a quantized weight must come from upload_weight");
  QuantMatrix m;
  m.codes = w.data;
  m.scales = w.quant.scales;
  m.biases = w.quant.biases;
  m.row_scales = w.scales;
  m.rows = w.rows;
  m.cols = w.cols;
  m.group = w.quant.group;
  m.bf16_pairs = bf16_pair_codes_.count(w.data) > 0;
  m.scale_type = w.quant.scale_dtype == DType::F16    ? kScaleF16
                 : w.quant.scale_dtype == DType::BF16 ? kScaleBf16
                                                      : kScaleF32;
  const bool four = w.quant.bits == 4;
  switch (w.format) {
    case WeightFormat::Dense:
      m.kind = kQuantInt8Rows;
      break;
    case WeightFormat::Affine:
      m.kind = four ? kQuantAffine4 : kQuantAffine8;
      break;
    case WeightFormat::Symmetric:
      m.kind = four ? kQuantSymmetric4 : kQuantSymmetric8;
      break;
    case WeightFormat::Fp8Block:
      m.kind = kQuantFp8;
      break;
    case WeightFormat::Mxfp4:
      m.kind = kQuantMxfp4;
      break;
  }
  return m;
}

void CudaBackend::quant_matmul(const float* x, int64_t rows, const Weight& w, const float* bias, float* out) {
  Scope scope(this, "matmul", w.rows, w.cols, rows);
  if (rows == 0) return;
  const QuantMatrix m = quant_matrix(w);
  prepare_matmul(rows, w);
  if (quant_stream_takes(m, rows)) {
    ++quant_streams_;
    if (m.bf16_pairs) ++quant_pair_streams_;
    return matmul_quant_stream(x, rows, m, bias, out, stream_);
  }
  if (rows <= 64) return matmul_quant_decode(x, rows, m, bias, out, workspace_, counters_, stream_);
  // Prefill: the bf16 copy is written in stream order just before the GEMM that reads it, so this
  // op is issued now rather than recorded (a recorded step replays it in place: the same order).
  scope.direct();
  const bool int8_rows = m.kind == kQuantInt8Rows;
  void* dense = dequantize_dense(w, wgmma_, 0);
  cuda::matmul(x, rows, wgmma_ ? nullptr : dense, wgmma_ ? dense : nullptr, w.rows, w.cols, int8_rows ? nullptr : bias,
               out, workspace_, counters_, stream_);
  if (int8_rows) scale_quant_columns(out, rows, w.rows, m.row_scales, bias, stream_);
}

void* CudaBackend::dequantize_dense(const Weight& w, bool core, int buffer) {
  const QuantMatrix m = quant_matrix(w);
  void*& dst = quant_dense_[buffer];
  grow_workspace(dst, quant_dense_bytes_[buffer], packed_weight_bytes(w.rows, w.cols));
  if (core)
    dequantize_to_core(m, dst, stream_);
  else
    dequantize_to_fragments(m, dst, stream_);
  return dst;
}

void CudaBackend::moe_experts_quant(const float* x, int64_t rows, const int32_t* ids, const float* weights,
                                    int64_t top_k, const MoeExperts& e, float* out) {
  const int64_t E = e.num_experts;
  const size_t gate_up_bytes = packed_weight_bytes(2 * e.intermediate, e.hidden);
  const size_t down_bytes = packed_weight_bytes(e.hidden, e.intermediate);
  grow_workspace(moe_dense_, moe_dense_bytes_, static_cast<size_t>(E) * (gate_up_bytes + down_bytes));
  moe_dense_weights_.assign(static_cast<size_t>(2 * E), Weight{});
  auto* base = static_cast<char*>(moe_dense_);
  // At decode sizes only the routed experts are dequantized (each copy's CTAs check the ids on the
  // device); with more slots than that nearly every expert is routed anyway.
  const int64_t slots = rows * top_k;
  const bool filter = slots <= 256;
  const auto dense = [&](const Weight& w, void* slot, int64_t expert) {
    if (w.layout != WeightLayout::QuantFragments) return w;
    TACHYON_CHECK(w.format != WeightFormat::Dense, "MoE experts of I8 weights (row scales) are not supported on CUDA");
    ExpertFilter only;
    if (filter) only = {ids, static_cast<int32_t>(slots), static_cast<int32_t>(expert)};
    dequantize_to_fragments(quant_matrix(w), slot, stream_, only);
    Weight d{slot, DType::BF16, w.rows, w.cols};
    d.layout = WeightLayout::MmaFragments;
    return d;
  };
  for (int64_t i = 0; i < E; ++i) {
    moe_dense_weights_[static_cast<size_t>(i)] = dense(e.gate_up[i], base + static_cast<size_t>(i) * gate_up_bytes, i);
    moe_dense_weights_[static_cast<size_t>(E + i)] =
        dense(e.down[i], base + static_cast<size_t>(E) * gate_up_bytes + static_cast<size_t>(i) * down_bytes, i);
  }
  MoeExperts dense_experts = e;
  dense_experts.gate_up = moe_dense_weights_.data();
  dense_experts.down = moe_dense_weights_.data() + E;
  moe_->run(x, rows, ids, weights, top_k, dense_experts, out);
}

}  // namespace tachyon::kernels::cuda
