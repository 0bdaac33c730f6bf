#include "clock_spy.h"

#include <chrono>

#include "check_cuda.h"

namespace {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void __launch_bounds__(32) clock_spy_kernel(unsigned long long span_ns, unsigned long long* counts) {
  if (threadIdx.x != 0) return;
  const unsigned long long t0 = global_ns();
  const long long c0 = clock64();
  unsigned long long t = t0;
  while (t - t0 < span_ns) t = global_ns();
  counts[0] = static_cast<unsigned long long>(clock64() - c0);
  counts[1] = t - t0;
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

ClockSpy::ClockSpy() {
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));  // no implicit sync with the default stream
  stream_ = s;
  CHECK_CUDA(cudaMalloc(&counts_, 2 * sizeof(unsigned long long)));
}

ClockSpy::~ClockSpy() {
  cudaFree(counts_);
  cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

void ClockSpy::start(double seconds) {
  clock_spy_kernel<<<1, 32, 0, static_cast<cudaStream_t>(stream_)>>>(static_cast<unsigned long long>(seconds * 1e9),
                                                                      counts_);
  CHECK_CUDA(cudaGetLastError());
}

ClockSpyReading ClockSpy::finish() {
  const double t0 = wall_seconds();
  CHECK_CUDA(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)));
  ClockSpyReading r;
  r.late_s = wall_seconds() - t0;
  unsigned long long counts[2];
  CHECK_CUDA(cudaMemcpy(counts, counts_, sizeof counts, cudaMemcpyDeviceToHost));
  r.mhz = counts[1] ? 1e3 * static_cast<double>(counts[0]) / static_cast<double>(counts[1]) : 0;
  return r;
}
