// The roofline of a bandwidth-bound kernel on this GPU: a 4 GiB device-to-device copy, bytes read
// plus bytes written per second (GB/s), median of 5 timed copies after one warm-up.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "check_cuda.h"

inline double measure_copy_gbps() {
  const size_t bytes = size_t{4} << 30;
  void *src, *dst;
  CHECK_CUDA(cudaMalloc(&src, bytes));
  CHECK_CUDA(cudaMalloc(&dst, bytes));
  CHECK_CUDA(cudaMemset(src, 1, bytes));
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  std::vector<float> ms(6);
  for (float& t : ms) {
    CHECK_CUDA(cudaEventRecord(a));
    CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice));
    CHECK_CUDA(cudaEventRecord(b));
    CHECK_CUDA(cudaEventSynchronize(b));
    CHECK_CUDA(cudaEventElapsedTime(&t, a, b));
  }
  ms.erase(ms.begin());  // the warm-up
  std::sort(ms.begin(), ms.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaFree(src);
  cudaFree(dst);
  return 2.0 * static_cast<double>(bytes) / (ms[2] / 1e3) / 1e9;
}
