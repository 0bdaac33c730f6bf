#include "kernels/cuda/step_timeline.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "kernels/cuda/common.cuh"

namespace tachyon::kernels::cuda {
namespace {

std::vector<TimelineAttach>& units() {
  static std::vector<TimelineAttach> attached;  // filled during static initialisation
  return attached;
}
struct DeviceBuffer {
  TimelineRecord* records = nullptr;
  unsigned* count = nullptr;
  unsigned capacity = 0;
};
DeviceBuffer& buffer() {
  static DeviceBuffer b;
  return b;
}
void attach_all(const DeviceBuffer& b) {
  for (TimelineAttach attach : units()) attach(b.records, b.count, b.capacity);
  TACHYON_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

bool timeline_register(TimelineAttach attach) {
  units().push_back(attach);
  return true;
}

bool timeline_built() { return !units().empty(); }

void timeline_start(unsigned capacity) {
  DeviceBuffer& b = buffer();
  if (b.records) timeline_stop();
  TACHYON_CUDA_CHECK(cudaDeviceSynchronize());
  TACHYON_CUDA_CHECK(cudaMalloc(&b.records, sizeof(TimelineRecord) * capacity));
  TACHYON_CUDA_CHECK(cudaMalloc(&b.count, sizeof(unsigned)));
  TACHYON_CUDA_CHECK(cudaMemset(b.count, 0, sizeof(unsigned)));
  TACHYON_CUDA_CHECK(cudaMemset(b.records, 0, sizeof(TimelineRecord) * capacity));  // unused mark slots stay zero
  b.capacity = capacity;
  attach_all(b);
  TACHYON_CUDA_CHECK(cudaDeviceSynchronize());
}

std::vector<TimelineRecord> timeline_stop() {
  DeviceBuffer& b = buffer();
  if (!b.records) return {};
  TACHYON_CUDA_CHECK(cudaDeviceSynchronize());
  attach_all(DeviceBuffer{});
  unsigned count = 0;
  TACHYON_CUDA_CHECK(cudaMemcpy(&count, b.count, sizeof count, cudaMemcpyDeviceToHost));
  if (count > b.capacity)  // a partial timeline would pass for a whole one
    std::fprintf(stderr, "step timeline: %u slots asked for, %u kept; start it with a larger capacity\n", count,
                 b.capacity);
  std::vector<TimelineRecord> records(std::min(count, b.capacity));
  TACHYON_CUDA_CHECK(
      cudaMemcpy(records.data(), b.records, sizeof(TimelineRecord) * records.size(), cudaMemcpyDeviceToHost));
  std::erase_if(records, [](const TimelineRecord& r) { return r.t_call == 0; });
  TACHYON_CUDA_CHECK(cudaFree(b.records));
  TACHYON_CUDA_CHECK(cudaFree(b.count));
  b = DeviceBuffer{};
  return records;
}

}  // namespace tachyon::kernels::cuda
