// The CUDA backend's fusions: add_rms_norm deferred into the op after it (backend.h, "Deferred
// norm fusion"): at decode rows into the streaming matmul's staging, at prefill rows writing the
// wgmma matmul's core-matrix input; and the gated MLP with the activation in the gate_up GEMM's
// epilogue. Each gives the bits of the unfused ops (tests/kernels/cuda, tests/diff/hf).
#include <optional>

#include "kernels/cuda/cuda_backend_impl.h"

namespace tachyon::kernels::cuda {

void CudaBackend::gated_mlp(const float* x, int64_t rows, const Weight& gate_up_w, const Weight& down_w, Activation act,
                            float* gate_up, float* act_out, float* out) {
  const int64_t inter = down_w.cols;
  // --quantize-decode: one gated MLP per run of rows of one kind (a pending norm launches first).
  if (for_each_row_kind(rows, gate_up_w, [&](int64_t first, int64_t n, bool decode) {
        settle();
        gated_mlp(x + first * gate_up_w.cols, n, gate_up_w.of_kind(decode), down_w.of_kind(decode), act,
                  gate_up + first * gate_up_w.rows, act_out + first * inter, out + first * down_w.rows);
      }))
    return;
  const void* gate_up_core = core_copy(rows, gate_up_w);
  const void* down_core = core_copy(rows, down_w);
  // Quantized weights (not I8: its row scales apply after the reduction) take the fused path on
  // core-matrix copies dequantized for this call (quant_weights.cpp): the bf16 path's bits.
  const auto group_scaled = [](const Weight& w) {
    return w.layout == WeightLayout::QuantFragments && w.format != WeightFormat::Dense;
  };
  const bool quantized = group_scaled(gate_up_w) && group_scaled(down_w);
  const bool dense = gate_up_w.layout == WeightLayout::MmaFragments && down_w.layout == WeightLayout::MmaFragments;
  if (!gated_mlp_fusion_ || !(dense || quantized) || gate_up_w.rows != 2 * inter ||
      !cuda::gated_mlp_fuses(rows, inter, quantized ? wgmma_ : gate_up_core && down_core))
    return Backend::gated_mlp(x, rows, gate_up_w, down_w, act, gate_up, act_out, out);
  const auto norm = take_prefill_norm(x, rows, gate_up_w.cols);
  grow_workspace(workspace_, workspace_bytes_, cuda::gated_mlp_workspace_bytes(rows, gate_up_w.cols, inter));
  Scope scope(this, norm ? "add_rms_norm+gated_mlp" : "gated_mlp", gate_up_w.rows, gate_up_w.cols, rows);
  if (quantized) {
    scope.direct();  // the copies are written now, in stream order before the GEMMs that read them
    gate_up_core = dequantize_dense(gate_up_w, true, 0);
    down_core = dequantize_dense(down_w, true, 1);
  }
  const bool gelu = act == Activation::GeluTanh;
  if (norm) {
    norm_into_core(*norm);
    cuda::gated_mlp_core_input(workspace_, gelu, rows, gate_up_core, gate_up_w.cols, inter, down_core, down_w.rows,
                               out, stream_);
  } else {
    cuda::gated_mlp(x, gelu, rows, gate_up_core, gate_up_w.cols, inter, down_core, down_w.rows, out, workspace_,
                    stream_);
  }
  ++fused_gated_mlps_;
}

void CudaBackend::add_rms_norm(float* x, const float* y, const Weight& w, int64_t rows, int64_t dim, float eps,
                               float weight_offset, float* out) {
  if (rows >= 1 && rows <= fused_norm_rows_ && !profile_->enabled && w.dtype == DType::F32 && w.cols == dim &&
      cuda::add_rms_norm_is_wide(x, y, static_cast<const float*>(w.data), dim, out) &&
      !overlaps(x, rows * dim, y, rows * dim) && !overlaps(x, rows * dim, out, rows * dim) &&
      !overlaps(y, rows * dim, out, rows * dim)) {
    settle();
    grow_zeroed_counters(norm_arrivals_, num_norm_arrivals_, 1);
    pending_norm_ = PendingNorm{x, y, static_cast<const float*>(w.data), rows, dim, eps, weight_offset, out};
    return;
  }
  if (prefill_norm_fusion_ && rows > 64 && !profile_->enabled && w.dtype == DType::F32 && w.cols == dim &&
      cuda::add_rms_norm_writes_core(x, y, static_cast<const float*>(w.data), dim, out)) {
    settle();
    pending_norm_ = PendingNorm{x, y, static_cast<const float*>(w.data), rows, dim, eps, weight_offset, out};
    return;
  }
  {
    Scope scope(this, "add_rms_norm");
    TACHYON_CHECK(w.dtype == DType::F32 && w.cols == dim, "rms_norm weight must be an uploaded [dim] vector");
    if (cuda::add_rms_norm(x, y, static_cast<const float*>(w.data), rows, dim, eps, weight_offset, out, stream_))
      return;
  }
  Backend::add_rms_norm(x, y, w, rows, dim, eps, weight_offset, out);
}

void CudaBackend::settle() {
  if (swap_) swap_->issue();  // the swaps queued since the last op go before the next one (host_swap.h)
  if (!pending_norm_) return;
  const PendingNorm p = *pending_norm_;
  pending_norm_.reset();
  Scope scope(this, "add_rms_norm");
  TACHYON_CHECK(cuda::add_rms_norm(p.x, p.y, p.w, p.rows, p.dim, p.eps, p.weight_offset, p.out, stream_),
                "a pending add_rms_norm lost its wide path");
}

bool CudaBackend::matmul_after_pending_norm(const float* x, int64_t rows, const Weight& w, const float* bias,
                                            float* out) {
  const PendingNorm p = *pending_norm_;
  if (p.rows > 64) return matmul_after_prefill_norm(x, rows, w, bias, out);
  const int64_t n = rows * p.dim, out_n = rows * w.rows;
  if (x != p.out || rows != p.rows || w.layout != WeightLayout::MmaFragments || w.cols != p.dim ||
      !cuda::matmul_streams(rows, w.rows, w.cols) || !cuda::stream_matmul_holds_x(rows, w.cols) || out_n == 0 ||
      overlaps(out, out_n, p.x, n) || overlaps(out, out_n, p.y, n) || overlaps(out, out_n, p.out, n))
    return false;
  pending_norm_.reset();
  Scope scope(this, "add_rms_norm+matmul", w.rows, w.cols, rows);
  cuda::StreamAddNorm norm;
  norm.x = p.x, norm.y = p.y, norm.w = p.w, norm.eps = p.eps, norm.weight_offset = p.weight_offset;
  norm.out = p.out, norm.arrivals = norm_arrivals_;
  cuda::matmul_after_add_norm(norm, rows, w.data, w.rows, w.cols, bias, out, stream_);
  ++fused_norms_;
  return true;
}

std::optional<CudaBackend::PendingNorm> CudaBackend::take_prefill_norm(const float* x, int64_t rows, int64_t k) {
  if (!pending_norm_ || pending_norm_->rows <= 64 || x != pending_norm_->out || rows != pending_norm_->rows ||
      k != pending_norm_->dim)
    return std::nullopt;
  const auto p = pending_norm_;
  pending_norm_.reset();
  return p;
}

void CudaBackend::norm_into_core(const PendingNorm& p) {
  cuda::add_rms_norm_core(p.x, p.y, p.w, p.rows, p.dim, p.eps, p.weight_offset, p.out, workspace_,
                          cuda::matmul_core_rows(p.rows), stream_);
  ++fused_prefill_norms_;
}

bool CudaBackend::matmul_after_prefill_norm(const float* x, int64_t rows, const Weight& w, const float* bias,
                                            float* out) {
  const void* w_core = core_copy(rows, w);
  // Quantized weights (not I8) on a core-matrix copy dequantized for this call, as in gated_mlp.
  const bool quantized = w.layout == WeightLayout::QuantFragments && w.format != WeightFormat::Dense;
  if ((w.layout != WeightLayout::MmaFragments && !quantized) ||
      !cuda::matmul_takes_core_input(rows, w.cols, quantized ? wgmma_ : w_core != nullptr))
    return false;
  const auto p = take_prefill_norm(x, rows, w.cols);
  if (!p) return false;
  prepare_matmul(rows, w);
  Scope scope(this, "add_rms_norm+matmul", w.rows, w.cols, rows);
  if (quantized) {
    scope.direct();
    w_core = dequantize_dense(w, true, 0);
  }
  norm_into_core(*p);
  cuda::matmul_core_input(workspace_, rows, w.cols, w_core, w.rows, bias, out, stream_);
  return true;
}

}  // namespace tachyon::kernels::cuda
