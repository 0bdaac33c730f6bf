// Collectives for tensor parallelism: the ranks of one model, each a Backend on its own device,
// combine partial results (a row-parallel projection's partial sums) into the same full result.
//
// HostCollective is the in-process group whose ranks are threads: every rank calls
// all_reduce_sum with its buffer, the call returns when all have, and each rank then holds the
// sum taken in rank order (rank 0 + rank 1 + ...), so every rank gets the same bits and the bits
// do not depend on thread timing. The CPU backend uses it directly (its "devices" are host
// memory); it is also what tests use as a fake multi-rank machine to check the sharded math
// against the unsharded model. A GPU backend's group (NCCL) is its own.
//
//   auto group = std::make_shared<HostCollective>(2);
//   backend0->join_group(group, 0);  backend1->join_group(group, 1);
//   // in thread r: backend_r->all_reduce_sum(partial_r, n);   // both now hold partial_0 + partial_1
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace tachyon::kernels {

class HostCollective {
 public:
  explicit HostCollective(int world);
  int world() const { return world_; }

  // Blocks until every rank has called it with the same n; then x (host memory, n floats) holds
  // the rank-ordered sum on every rank.
  void all_reduce_sum(int rank, float* x, int64_t n);
  // Wakes every waiting rank with an error, and fails every later call: a rank that failed
  // before reaching a collective would otherwise leave the others waiting for ever.
  void abort();

 private:
  // Waits until all ranks arrive; the last one runs `last` before releasing the others.
  template <class F>
  void barrier(std::unique_lock<std::mutex>& lock, F&& last);

  const int world_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  bool mismatch_ = false;
  std::vector<float*> buffers_;
  std::vector<int64_t> sizes_;
  std::vector<float> sum_;
};

}  // namespace tachyon::kernels
