// The streaming decode matmul (M <= 8): one long-lived CTA per SM streams a contiguous run of
// the weight's n-tiles through a ring in shared memory filled by bulk copies (TMA), so every SM
// keeps up to kStreamSlots x 8 KB of weights in flight from its first cycle to its last, with no
// per-CTA ramp or tail between batches, and starts streaming before the previous kernel ends.
// Same canonical order as every matmul kernel (common.cuh): one MMA chain per (n-tile, segment),
// the segment sums added in segment order.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tachyon::kernels::cuda {

constexpr int kStreamMaxRows = 8;

// x += y, then the matmul's input is add_rms_norm's output row, (weight_offset + w) · x / rms(x):
// every CTA computes it while it stages its input (rowwise.cuh's wide norm: the add_rms_norm
// kernel's bits), which takes a launch and its wait off a decode step's critical path. x and out
// (the normed rows, for the step's later readers) are written by the CTA that stages last, once
// every CTA has read x: `arrivals` counts them (a zeroed device word; that CTA resets it).
// Requires add_rms_norm's wide path: k % 4 == 0, 1024 <= k <= 8192, 16-byte aligned rows.
struct StreamAddNorm {
  float* x = nullptr;
  const float* y = nullptr;
  const float* w = nullptr;
  float eps = 0.f, weight_offset = 0.f;
  float* out = nullptr;
  unsigned* arrivals = nullptr;
};

// Whether the streaming kernel takes x [rows, k]: held whole beside the ring (bf16), or, where it
// does not fit whole (3-8 rows of k 12288; k % 512 == 0, 16-byte aligned x), by 512-k segments
// through a second ring.
bool stream_matmul_fits(int64_t rows, int64_t k);
// Whether x is held whole: what the fused add_rms_norm needs (every CTA normalises whole rows).
bool stream_matmul_holds_x(int64_t rows, int64_t k);
// stream_matmul_fits, and x's alignment where it goes by segments.
bool stream_matmul_takes(const float* x, int64_t rows, int64_t k);

// How the streaming kernel shares x [rows, k]'s n-tiles among its CTAs: each takes its next
// n-tile from a device counter once the first `static_tiles` (the rings' first fill) are
// assigned, or every CTA streams a fixed contiguous share (`taken` false).
struct StreamTiles {
  bool taken = false;
  int static_tiles = 0;
};
StreamTiles stream_tiles(int64_t rows, int64_t n, int64_t k);
// Whether the stream's counters of taken n-tiles are back at zero (tests: every launch resets them).
bool stream_tile_counters_are_zero(cudaStream_t stream);

// out [M, N] = x [M, K] · Wᵀ (+ bias); w fragment-packed with kp_count k-pairs per n-tile.
// With `norm`, x is unused: the input is norm's (above).
void matmul_stream(const float* x, int M, int K, const uint4* w, int N, int kp_count, const float* bias, float* out,
                   cudaStream_t stream, const StreamAddNorm& norm = {});

// The routed experts of a decode-sized MoE call as one streamed matmul (moe.cu), so that they
// stream at the dense kernel's rate: n-tile j belongs to slot s = j / (n_local / 8), whose weight
// is table[ids[s]] (a fragment-packed [n_local, K] matrix; an id outside [0, experts) streams
// expert 0, whose outputs the caller ignores), whose input is x's row s / slots_per_row, and whose
// outputs go to out[s·n_local ..] (that row's alone). The routing writes ids, so the producer
// starts streaming only after the programmatic wait.
constexpr int kStreamMaxGatherSlots = 64;
struct StreamGather {
  const int32_t* ids = nullptr;        // [slots], on the device
  const void* const* table = nullptr;  // [experts] weight pointers, on the device
  int experts = 0, slots = 0, slots_per_row = 1, n_local = 0;
};
// Whether matmul_stream_gathered takes x [rows, k] and `slots` slots of n_local outputs.
bool stream_gather_fits(int64_t rows, int64_t k, int64_t slots, int64_t n_local);
void matmul_stream_gathered(const float* x, int M, int K, int kp_count, const StreamGather& gather, float* out,
                            cudaStream_t stream);

}  // namespace tachyon::kernels::cuda
