// The device side of step_timeline.h, included by common.cuh in TACHYON_TIMELINE builds only.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/step_timeline.h"

namespace tachyon::kernels::cuda {
namespace {  // one copy per translation unit: kernels of a unit see only their unit's symbols

// Constant memory: a kernel reads these before its wait, and a constant-cache hit keeps that read
// off the wait's path (a global load would add an L2 round trip before the wait).
__constant__ TimelineRecord* g_timeline_records = nullptr;
__constant__ unsigned* g_timeline_count = nullptr;
__constant__ unsigned g_timeline_capacity = 0;

void attach_timeline(TimelineRecord* records, unsigned* count, unsigned capacity) {
  cudaMemcpyToSymbol(g_timeline_records, &records, sizeof records);
  cudaMemcpyToSymbol(g_timeline_count, &count, sizeof count);
  cudaMemcpyToSymbol(g_timeline_capacity, &capacity, sizeof capacity);
}
[[maybe_unused]] const bool g_timeline_registered = timeline_register(&attach_timeline);

__device__ __forceinline__ uint64_t global_timer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ bool timeline_records_here() {
  return g_timeline_records != nullptr && threadIdx.x + threadIdx.y + threadIdx.z == 0;
}
// A CTA's slots are taken before its wait, so the atomic's round trip overlaps the wait; its marks
// then store into them without another round trip (thread 0 holds the first slot in shared memory).
__device__ __forceinline__ unsigned& timeline_base() {
  __shared__ unsigned base;
  return base;
}
__device__ __forceinline__ unsigned timeline_reserve() {
  return timeline_base() = atomicAdd(g_timeline_count, kTimelineSlotsPerCta);
}
__device__ __forceinline__ void timeline_write(unsigned slot, uint64_t t_call, uint64_t t_return, unsigned kind) {
  if (slot >= g_timeline_capacity) return;
  unsigned sm, smem;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(smem));
  TimelineRecord r;
  r.t_call = t_call, r.t_return = t_return, r.sm = sm, r.smem = smem, r.kind = kind;
  r.block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  r.grid = gridDim.x * gridDim.y * gridDim.z;
  r.threads = blockDim.x * blockDim.y * blockDim.z;
  g_timeline_records[slot] = r;
}

// A point in a kernel's run (a TimelineMark), recorded by thread 0 after its pdl_wait.
__device__ __forceinline__ void timeline_mark(unsigned kind) {
  if (g_timeline_records == nullptr) return;
  const uint64_t t = global_timer();
  timeline_write(timeline_base() + kind, t, t, kind);
}

}  // namespace

}  // namespace tachyon::kernels::cuda
