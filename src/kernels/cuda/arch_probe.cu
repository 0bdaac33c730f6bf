// The PTX version of the kernels this binary loaded for the current device (device_arch.h): an
// empty kernel compiled with the same TACHYON_CUDA_ARCHS as every other, so the driver picks the
// same entry of the fat binary for it (the device's sm_XX code, else compute_80 PTX it JIT-compiles).
#include <cuda_runtime.h>

#include "kernels/cuda/common.cuh"

namespace tachyon::kernels::cuda {
namespace {
__global__ void arch_probe_kernel() {}
}  // namespace

int loaded_ptx_version() {
  cudaFuncAttributes attributes{};
  TACHYON_CUDA_CHECK(cudaFuncGetAttributes(&attributes, arch_probe_kernel));
  return attributes.ptxVersion;
}

}  // namespace tachyon::kernels::cuda
