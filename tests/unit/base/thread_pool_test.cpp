#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <vector>

namespace tachyon {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  ThreadPool pool(3);
  for (size_t n : {1u, 2u, 3u, 7u, 1000u}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(n, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPool, PartitionIsDeterministic) {
  ThreadPool pool(2);
  std::vector<std::pair<size_t, size_t>> first(2), second(2);
  auto record = [&](std::vector<std::pair<size_t, size_t>>& out) {
    std::vector<std::pair<size_t, size_t>> ranges;
    std::mutex m;
    pool.parallel_for(101, [&](size_t b, size_t e) {
      std::lock_guard l(m);
      ranges.emplace_back(b, e);
    });
    std::sort(ranges.begin(), ranges.end());
    out = ranges;
  };
  record(first);
  record(second);
  EXPECT_EQ(first, second);
}

TEST(ThreadPool, RunOnAllRunsEachThreadOnce) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(pool.num_threads());
  for (int round = 0; round < 100; ++round) pool.run_on_all([&](size_t t) { hits[t].fetch_add(1); });
  for (auto& h : hits) EXPECT_EQ(h.load(), 100);
}

}  // namespace
}  // namespace tachyon
