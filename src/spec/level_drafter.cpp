#include "spec/level_drafter.h"

#include <algorithm>
#include <cstddef>

namespace tachyon::spec {

int64_t default_draft_vocabulary(int64_t vocab_size) { return std::max<int64_t>(2048, vocab_size / 2); }

kernels::TopTwo* DeviceLevels::get(int32_t k) {
  static_assert(offsetof(kernels::TopTwo, best) == 0, "best_token points at a TopTwo");
  if (k > capacity_) {
    backend_.deallocate(data_);
    capacity_ = std::max(k, 2 * capacity_);
    data_ = static_cast<kernels::TopTwo*>(backend_.allocate(static_cast<size_t>(capacity_) * sizeof(kernels::TopTwo)));
  }
  return data_;
}

std::vector<LevelChoice> DeviceLevels::read(int32_t n) {
  std::vector<LevelChoice> levels(static_cast<size_t>(std::max(0, n)));
  if (n > 0) backend_.copy_to_host(levels.data(), data_, levels.size() * sizeof(LevelChoice));
  return levels;
}

LevelChoice DeviceLevels::read_level(int32_t i) {
  LevelChoice level;
  backend_.copy_to_host(&level, data_ + i, sizeof(LevelChoice));
  return level;
}

}  // namespace tachyon::spec
