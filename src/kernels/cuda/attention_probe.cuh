// Backend::attention_probe on the GPU (PFlash's attention scorer over a long prompt): the
// scores of every query row and head against every key are written out ([H, queries, rows]
// f32 in the workspace: 134 MB for 16 heads, 64 queries and 32k keys), then each (head, query)
// row's max and softmax sum, then each key's mass and peak summed over the rows in a fixed order
// (deterministic). Only the two [rows] results cross to the host.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/ops.h"

namespace tachyon::kernels::cuda {

size_t attention_probe_workspace_bytes(int64_t rows, const AttentionProbeParams& p);
// q [rows, H, D], k [rows, KV, D] (device, f32); mass and peak: device [rows], overwritten with
// this layer's sums and maxima. p.query_weights (host) is copied into the workspace.
void attention_probe(const float* q, const float* k, int64_t rows, const AttentionProbeParams& p, void* workspace,
                     float* mass, float* peak, cudaStream_t stream);

}  // namespace tachyon::kernels::cuda
