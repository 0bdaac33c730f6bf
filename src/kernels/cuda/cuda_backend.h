// The CUDA backend (Hopper first): bf16 fragment-packed weights, f32 activations and paged
// KV on the device, every op on one stream. Plain C++ header: callers need no CUDA headers.
//
//   if (kernels::cuda_device_count() > 0) backend = kernels::make_cuda_backend();
//
// Host metadata arrays (ids, positions, block tables) are mirrored into device buffers
// keyed by content, so the per-layer calls of one step upload them once.
#pragma once

#include <memory>

#include "kernels/backend.h"

namespace tachyon::kernels {

// Number of CUDA devices visible (0 when there is no driver or no GPU).
int cuda_device_count();
// A backend on device 0; throws tachyon::Error when there is none.
std::unique_ptr<Backend> make_cuda_backend();

}  // namespace tachyon::kernels
