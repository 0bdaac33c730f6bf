#include "spec/level_drafter.h"

#include <algorithm>

namespace tachyon::spec {

int64_t default_draft_vocabulary(int64_t vocab_size) { return std::max<int64_t>(2048, vocab_size / 2); }

}  // namespace tachyon::spec
