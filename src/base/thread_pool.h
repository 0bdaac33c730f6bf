// A fixed pool of worker threads for data-parallel kernels.
//
// `parallel_for(n, fn)` splits [0, n) into one contiguous range per thread and calls
// fn(begin, end) on each; it returns when all ranges are done. The split depends only on n
// and the thread count, never on timing, so results are deterministic. Workers spin briefly
// before sleeping, because decode issues thousands of tiny parallel regions per second and
// a futex wake per region would dominate.
//
//   ThreadPool pool;                 // one thread per core
//   pool.parallel_for(rows, [&](size_t b, size_t e) { for (size_t i = b; i < e; ++i) work(i); });
//
// Not re-entrant: fn must not call parallel_for on the same pool. One caller at a time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tachyon {

class ThreadPool {
 public:
  explicit ThreadPool(size_t num_threads = 0);  // 0: one per online core
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t num_threads() const { return workers_.size() + 1; }

  // Runs fn(begin, end) over a deterministic partition of [0, n). `grain` is the smallest
  // range worth a thread; with n <= grain everything runs on the caller.
  void parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, size_t grain = 1);

  // Runs fn(thread_index) once on every thread (thread_index in [0, num_threads())).
  void run_on_all(const std::function<void(size_t)>& fn);

  // The process-wide pool used by kernels.
  static ThreadPool& global();

 private:
  void worker_loop(size_t index);

  std::vector<std::thread> workers_;
  const std::function<void(size_t)>* task_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<size_t> pending_{0};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
};

}  // namespace tachyon
