#include "spec/level_drafter.h"

#include <algorithm>
#include <cstddef>

#include "base/grow_buffer.h"

namespace tachyon::spec {

int64_t default_draft_vocabulary(int64_t vocab_size) { return std::max<int64_t>(2048, vocab_size / 2); }

kernels::TopTwo* DeviceLevels::get(int32_t k) {
  static_assert(offsetof(kernels::TopTwo, best) == 0, "best_token points at a TopTwo");
  // A device out of memory throws from the allocation: the levels are left empty, not holding
  // the released buffer (which the next chain would write and the destructor free again).
  const auto need = static_cast<size_t>(std::max(k, 0));
  return grow_buffer(
      data_, capacity_, need, std::max(need, 2 * capacity_), [&](kernels::TopTwo* old) { backend_.deallocate(old); },
      [&](size_t n) { return static_cast<kernels::TopTwo*>(backend_.allocate(n * sizeof(kernels::TopTwo))); });
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
