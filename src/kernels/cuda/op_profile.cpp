#include "kernels/cuda/op_profile.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace tachyon::kernels::cuda {

std::string OpProfile::report(cudaStream_t stream) {
  TACHYON_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::map<std::string, std::pair<int, double>> by_label;
  double total = 0;
  for (size_t i = 0; i < used_; ++i) {
    float ms = 0;
    TACHYON_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i].first, events_[i].second));
    auto& e = by_label[labels_[i]];
    e.first += 1, e.second += ms * 1e3;
    total += ms * 1e3;
  }
  std::vector<std::pair<std::string, std::pair<int, double>>> rows(by_label.begin(), by_label.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  std::string out = "| op | calls | total us | us/call | share |\n|---|---|---|---|---|\n";
  for (const auto& [label, v] : rows)
    out += fmt::format("| {} | {} | {:.1f} | {:.2f} | {:.1f}% |\n", label, v.first, v.second, v.second / v.first,
                       100 * v.second / total);
  out += fmt::format("| all ops | {} | {:.1f} | | |\n", used_, total);
  used_ = 0;
  labels_.clear();
  return out;
}

}  // namespace tachyon::kernels::cuda
