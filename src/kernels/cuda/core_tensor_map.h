// Tensor maps (TMA descriptors) of core-order bf16 matrices, host side: the driver's encoder through
// the runtime (no link against libcuda) and the 3-D map the prefill GEMM loads its stages with
// (matmul.cu), shared with the lab probe that feeds wgmmas the same way (bench/cuda/wgmma_rate_probe.cu).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tachyon::kernels::cuda {

// The driver's tensor-map encoder; null if the driver does not export it.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const auto encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &status) !=
            cudaSuccess ||
        status != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

// A core-matrix matrix (pack_core_weight's order; x after to_core_rows) of `rows` (a multiple of
// 8) x kb_count k-blocks as a 3-D tensor: (64 elements of a core matrix, k-block, row-block).
// One box, {64, 8, box_blocks}, is a wgmma stage of one operand: box_blocks row-blocks x 8 k-blocks,
// laid out in shared memory exactly as the consumers read it. Needs tensor_map_encoder().
inline CUresult encode_core_tensor_map(CUtensorMap* map, const void* base, int64_t rows, int64_t kb_count,
                                       uint32_t box_blocks) {
  const cuuint64_t dims[3] = {64, static_cast<cuuint64_t>(kb_count), static_cast<cuuint64_t>(rows / 8)};
  const cuuint64_t strides[2] = {128, static_cast<cuuint64_t>(kb_count) * 128};  // bytes, dims 1 and 2
  const cuuint32_t box[3] = {64, 8, box_blocks}, element_strides[3] = {1, 1, 1};
  return tensor_map_encoder()(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(base), dims, strides, box,
                              element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

}  // namespace tachyon::kernels::cuda
