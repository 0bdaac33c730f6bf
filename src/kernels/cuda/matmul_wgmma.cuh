// The sm_90a prefill matmul (matmul_wgmma.cu): entry points for the fused prefill ops and the
// kernel lab's width and epilogue settings. Plain matmuls reach it through matmul() (matmul.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace tachyon::kernels::cuda {

// out = gated_activation(gate_up) · Wᵀ (+ bias) with the activation applied as x is converted for
// the wgmma kernel (gate_up [rows, 2k]; gelu: GeluTanh, else SiLU): the bits of gated_activation
// then matmul, one launch fewer and no activation round trip through memory. Only where
// matmul_gated_fuses: M > 64 with the weight's core-matrix copy (w_core).
bool matmul_gated_fuses(int64_t rows, int64_t n, int64_t k, bool has_core);
void matmul_gated(const float* gate_up, bool gelu, int64_t rows, const void* w_core, int64_t n, int64_t k,
                  const float* bias, float* out, void* workspace, cudaStream_t stream);

// Prefill matmuls whose x is already the wgmma kernel's input (norm.cuh's add_rms_norm_core wrote
// it): bf16 in core-matrix order, matmul_core_rows(rows) rows (the last ones zero), k columns.
// Only where matmul_takes_core_input: rows > 64, the weight's core copy, k % 64 == 0.
int64_t matmul_core_rows(int64_t rows);
bool matmul_takes_core_input(int64_t rows, int64_t k, bool has_core);
void matmul_core_input(const void* xa, int64_t rows, int64_t k, const void* w_core, int64_t n, const float* bias,
                       float* out, cudaStream_t stream);

// The gated MLP at prefill rows: out = gated_activation(x · W_gate_upᵀ) · W_downᵀ (x [rows, hidden];
// gate_up_core: the core-matrix copy of the fused [2 · inter, hidden] weight, the gate rows then the
// up rows; down_core: [n, inter]; no biases). The gate_up GEMM's tiles hold matching gate and up
// columns, and their epilogue writes act(gate) · up as the down GEMM's bf16 input: the bits of
// matmul then matmul_gated, without the fp32 gate_up's round trip through memory or the
// conversion's launch. Only where gated_mlp_fuses: M > 64, both core copies, inter % 64 == 0, the
// wgmma kernel by tensor copies in pairs. Workspace: gated_mlp_workspace_bytes.
bool gated_mlp_fuses(int64_t rows, int64_t inter, bool has_cores);
size_t gated_mlp_workspace_bytes(int64_t rows, int64_t hidden, int64_t inter);
void gated_mlp(const float* x, bool gelu, int64_t rows, const void* gate_up_core, int64_t hidden, int64_t inter,
               const void* down_core, int64_t n, float* out, void* workspace, cudaStream_t stream);
// The same with x already at the workspace's start as matmul_core_input takes it (hidden % 64 == 0).
void gated_mlp_core_input(void* workspace, bool gelu, int64_t rows, const void* gate_up_core, int64_t hidden,
                          int64_t inter, const void* down_core, int64_t n, float* out, cudaStream_t stream);
// The prefill (wgmma) tile's width in output columns: 128 or 192; 0 (the default): chosen per
// matrix shape. Same bits at every width (the canonical order).
void set_wgmma_columns(int cols);
// The wgmma kernel's epilogue: tensor stores through shared memory (true, the default, where rows
// of the output start 16-byte aligned) or one 8-byte store per lane and row. Same values either way.
void set_wgmma_tma_store(bool on);
// The width the wgmma kernel runs x [rows, k] · Wᵀ [n, k] at (rows > 64).
int wgmma_columns_for(int64_t rows, int64_t n);

}  // namespace tachyon::kernels::cuda
