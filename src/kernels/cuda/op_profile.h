// Per-op GPU time for the benchmarks (cuda_profile_enable / cuda_profile_report in cuda_backend.h);
// the step timeline (step_timeline.h, lab builds) and the graph-key trace (step_graph_trace.h) are
// the backend's other profiling tools.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/common.cuh"

namespace tachyon::kernels::cuda {

// Per-op GPU time: a cudaEvent pair around every op while enabled (the events serialise the
// stream, so the programmatic overlap between kernels is lost: a diagnostic, not a benchmark).
class OpProfile {
 public:
  ~OpProfile() {
    for (auto& e : events_) cudaEventDestroy(e.first), cudaEventDestroy(e.second);
  }
  bool enabled = false;
  void begin(cudaStream_t stream, std::string label) {
    if (used_ == events_.size()) {
      std::pair<cudaEvent_t, cudaEvent_t> e;
      TACHYON_CUDA_CHECK(cudaEventCreate(&e.first));
      TACHYON_CUDA_CHECK(cudaEventCreate(&e.second));
      events_.push_back(e);
    }
    labels_.push_back(std::move(label));
    TACHYON_CUDA_CHECK(cudaEventRecord(events_[used_].first, stream));
  }
  void end(cudaStream_t stream) { TACHYON_CUDA_CHECK(cudaEventRecord(events_[used_++].second, stream)); }
  // The markdown table of time per op label since the last report (synchronises the stream).
  std::string report(cudaStream_t stream);

 private:
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> events_;
  std::vector<std::string> labels_;
  size_t used_ = 0;
};

}  // namespace tachyon::kernels::cuda
