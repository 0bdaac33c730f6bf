#include "kernels/cuda/step_graph_trace.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace tachyon::kernels::cuda {

void StepKeyTrace::new_key(const std::string& key) {
  const Seen* best = nullptr;
  size_t common = 0;
  for (const Seen& s : seen_) {
    if (s.ends.size() != ends_.size()) continue;
    const size_t n = std::mismatch(s.key.begin(), s.key.begin() + std::min(s.key.size(), key.size()), key.begin()).first -
                     s.key.begin();
    if (!best || n > common) best = &s, common = n;
  }
  if (!best) {
    std::fprintf(stderr, "graph-trace: new key, %zu ops, none earlier with as many\n", ends_.size());
  } else {
    size_t op = 0;
    while (op < ends_.size() && ends_[op] <= common) ++op;
    const size_t begin = op == 0 ? 0 : ends_[op - 1], end = op < ends_.size() ? ends_[op] : key.size();
    const char* name = "(a copy or the upload)";
    constexpr size_t kLaunchHeader = 40;
    if (end - begin >= kLaunchHeader) {
      const void* kernel = nullptr;
      std::memcpy(&kernel, key.data() + begin, sizeof kernel);
      if (cudaFuncGetName(&name, kernel) != cudaSuccess) {
        cudaGetLastError();
        name = "(not a kernel)";
      }
    }
    std::string words;
    for (size_t w = begin + (common - begin) / 8 * 8; w + 8 <= end && w + 8 <= best->key.size(); w += 8) {
      uint64_t was = 0, now = 0;
      std::memcpy(&was, best->key.data() + w, 8);
      std::memcpy(&now, key.data() + w, 8);
      if (was != now) words += " @" + std::to_string(w - begin) + ": " + std::to_string(was) + " -> " + std::to_string(now);
    }
    std::fprintf(stderr, "graph-trace: new key, %zu ops, differs at op %zu (%s) byte %zu of %zu:%s\n", ends_.size(), op,
                 name, common - begin, end - begin, words.c_str());
  }
  seen_.push_back({key, ends_});
}

}  // namespace tachyon::kernels::cuda
