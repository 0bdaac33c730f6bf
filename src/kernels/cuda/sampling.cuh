// Backend::sample_tokens on the device: the token kernels::sample_token draws, bit for bit, with
// only the ids leaving the GPU.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/ops.h"

namespace tachyon::kernels::cuda {

// Device scratch sample_tokens needs for `rows` rows of n logits.
size_t sample_workspace_bytes(int64_t rows, int64_t n);

// ids[r] = kernels::sample_token(x[r, :n), params[r]) for r < rows, or -1 where no logit of the
// row is finite. params and ids are device memory; workspace holds sample_workspace_bytes.
void sample_tokens(const float* x, int64_t rows, int64_t n, const TokenSampling* params, void* workspace,
                   int32_t* ids, cudaStream_t stream);

}  // namespace tachyon::kernels::cuda
