// Linear-attention ops (Gated DeltaNet, Qwen3-Next) on the device, over a ragged batch of
// sequences each working in its own recurrent-state slot (ops.h RecurrentMeta), with the
// block-boundary snapshots the prefix cache and rollback resume from.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/ops.h"

namespace tachyon::kernels::cuda {

// RecurrentMeta with its arrays mirrored on the device.
struct DeviceRecurrentMeta {
  int64_t num_seqs = 0;
  const int32_t* seq_row_begin = nullptr;      // [num_seqs + 1]
  const int32_t* seq_state_slot = nullptr;     // [num_seqs]
  const int32_t* row_snapshot_slot = nullptr;  // [rows]
};

// One thread per (sequence, channel), its rows in order; the window of the last kernel − 1
// inputs in registers. w: fragment-packed [channels, kernel] (kernel <= 8).
void causal_conv1d_silu(const float* x, int64_t channels, const void* w, int64_t kernel,
                        const DeviceRecurrentMeta& meta, float* state, int64_t state_stride, float* out,
                        cudaStream_t stream);

// One CTA per (sequence, value head, 32 state columns), tokens in order, the state in registers
// (linear_attention.cu says how). k_dim <= 128. Every row's arithmetic is fixed: the bits do not
// depend on the batch or on where a sequence's forwards split.
void gated_delta_rule(const float* qkv, int64_t qkv_stride, const float* ba, const DeltaRuleParams& p,
                      const DeviceRecurrentMeta& meta, float* state, int64_t state_stride, float* out,
                      cudaStream_t stream);

}  // namespace tachyon::kernels::cuda
