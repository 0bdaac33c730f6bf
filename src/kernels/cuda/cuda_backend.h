// The CUDA backend (Hopper first): bf16 fragment-packed weights, f32 activations and paged
// KV on the device, every op on one stream. Plain C++ header: callers need no CUDA headers.
//
//   if (kernels::cuda_device_count() > 0) backend = kernels::make_cuda_backend();
//
// Steps the engine marks as repeating (Backend::set_repeating_step: plain decode) run as CUDA
// graphs (step_graph.h; CudaOptions::graphs or cuda_graphs_enable: every step or none):
// the ops of a step are recorded with keys that describe them exactly, the
// host metadata they read (ids, positions, block tables) staged in pinned memory uploaded at
// the step's start, and a step whose key sequence ran before replays a captured graph (same
// bits as issuing the ops directly, tested). Otherwise host arrays are mirrored into device
// buffers keyed by content. Every kernel is launched with programmatic dependent launch (common.cuh), so the
// next kernel starts while the current one drains; nothing inside a step synchronises with
// the host (MoE routing and the linear-attention ops, which do, run outside the graphs), and
// the workspaces only grow (geometrically), so a steady decode loop allocates nothing.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_options.h"

namespace tachyon::kernels {

// Number of CUDA devices visible (0 when there is no driver or no GPU).
int cuda_device_count();
// A backend on device 0 with `options` (cuda_options.h: by default the environment's, read once
// here); throws tachyon::Error when there is no device or an option's value is unknown.
std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options = CudaOptions::from_environment());

// Per-op GPU time (bench/cuda): while enabled, every op of `backend` (a CUDA backend) is
// bracketed by cudaEvents; the report is a markdown table of time per op class (matmuls
// by shape), sorted by total time, and resets the record. The events serialise the stream.
void cuda_profile_enable(Backend& backend, bool on);
std::string cuda_profile_report(Backend& backend);

// CUDA graphs for every step (on) or none (off), overriding the engine's repeating-step hint
// (see above); the counters say how steps were issued, and where the host's time went at the
// steps' host reads: issuing the recorded ops (flush: replay, capture or direct launches) and
// waiting for the device.
struct CudaGraphCounters {
  uint64_t replays = 0, captures = 0, direct = 0, capture_failures = 0;
  double flush_seconds = 0, wait_seconds = 0;
  double replay_seconds = 0, capture_seconds = 0, direct_seconds = 0;  // host time per kind of flush
};
void cuda_graphs_enable(Backend& backend, bool on);
// How many add_rms_norm calls ran inside the streaming matmul that read their output (tests).
uint64_t cuda_fused_norm_launches(Backend& backend);
// How many quantized-weight matmuls ran on the streaming decode kernel (matmul_quant.cuh; tests).
uint64_t cuda_quant_stream_matmuls(Backend& backend);
// Of them, how many decoded their 4-bit codes as bf16 pairs (QuantMatrix::bf16_pairs; tests).
uint64_t cuda_quant_pair_stream_matmuls(Backend& backend);
// How many gated_mlp calls ran with the activation in the gate_up GEMM's epilogue (tests).
uint64_t cuda_fused_gated_mlps(Backend& backend);
// How many add_rms_norm calls at prefill rows wrote the next matmul's input themselves (tests).
uint64_t cuda_fused_prefill_norms(Backend& backend);
// How many launches of the swap copy kernel swap_copy's queued copies took (host_swap.h: one per
// run of same-direction swaps between two ops; tests).
uint64_t cuda_swap_launches(Backend& backend);
CudaGraphCounters cuda_graph_counters(Backend& backend);
// Whether the streaming matmul's counters of taken n-tiles (matmul_stream.cuh) are back at zero
// after the backend's work so far: each launch resets them (tests).
bool cuda_stream_tile_counters_are_zero(Backend& backend);

}  // namespace tachyon::kernels
