// The CUDA backend (Hopper first): bf16 fragment-packed weights, f32 activations and paged
// KV on the device, every op on one stream. Plain C++ header: callers need no CUDA headers.
//
//   if (kernels::cuda_device_count() > 0) backend = kernels::make_cuda_backend();
//
// Host metadata arrays (ids, positions, block tables) are mirrored into device buffers
// keyed by content, so the per-layer calls of one step upload them once. Every kernel is
// launched with programmatic dependent launch (common.cuh), so the next op's kernel starts
// while the current one drains; nothing inside a step synchronises with the host, and the
// workspaces only grow (geometrically), so a steady decode loop allocates nothing.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"

namespace tachyon::kernels {

// Number of CUDA devices visible (0 when there is no driver or no GPU).
int cuda_device_count();
// A backend on device 0; throws tachyon::Error when there is none.
std::unique_ptr<Backend> make_cuda_backend();

// Per-op GPU time (bench/cuda): while enabled, every op of `backend` (a CUDA backend) is
// bracketed by cudaEvents; the report is a markdown table of time per op class (matmuls
// by shape), sorted by total time, and resets the record. The events serialise the stream.
void cuda_profile_enable(Backend& backend, bool on);
std::string cuda_profile_report(Backend& backend);

}  // namespace tachyon::kernels
