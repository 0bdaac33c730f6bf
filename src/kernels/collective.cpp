#include "kernels/collective.h"

#include <algorithm>

#include "base/error.h"

namespace tachyon::kernels {

HostCollective::HostCollective(int world) : world_(world), buffers_(static_cast<size_t>(world)),
                                            sizes_(static_cast<size_t>(world)) {
  if (world < 1) throw Error("a tensor-parallel group needs at least one rank (got {})", world);
}

template <class F>
void HostCollective::barrier(std::unique_lock<std::mutex>& lock, F&& last) {
  const uint64_t generation = generation_;
  if (++arrived_ == world_) {
    last();
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != generation || aborted_; });
  if (aborted_) throw Error("tensor-parallel group aborted: another rank failed");
}

void HostCollective::abort() {
  std::lock_guard lock(mutex_);
  aborted_ = true;
  cv_.notify_all();
}

void HostCollective::all_reduce_sum(int rank, float* x, int64_t n) {
  if (rank < 0 || rank >= world_) throw Error("rank {} is outside the tensor-parallel group of {}", rank, world_);
  if (world_ == 1) return;
  std::unique_lock lock(mutex_);
  if (aborted_) throw Error("tensor-parallel group aborted: another rank failed");
  buffers_[static_cast<size_t>(rank)] = x;
  sizes_[static_cast<size_t>(rank)] = n;
  // Phase 1: every buffer posted; the last rank to arrive adds them in rank order.
  barrier(lock, [&] {
    mismatch_ = std::any_of(sizes_.begin(), sizes_.end(), [&](int64_t s) { return s != sizes_[0]; });
    if (mismatch_) return;
    sum_.assign(buffers_[0], buffers_[0] + n);
    for (int r = 1; r < world_; ++r) {
      const float* b = buffers_[static_cast<size_t>(r)];
      for (int64_t i = 0; i < n; ++i) sum_[static_cast<size_t>(i)] += b[i];
    }
  });
  const bool mismatch = mismatch_;
  if (!mismatch) std::copy(sum_.begin(), sum_.begin() + n, x);
  // Phase 2: nobody reuses sum_ (the next call) before every rank has copied it out.
  barrier(lock, [] {});
  if (mismatch) throw Error("all_reduce_sum: the ranks of the group disagree on the element count");
}

}  // namespace tachyon::kernels
