// A fixed pool of worker threads for data-parallel kernels.
//
// `parallel_for(n, fn)` splits [0, n) into contiguous chunks (a few per thread) and calls
// fn(begin, end) on each; it returns when all chunks are done. Chunk boundaries depend only
// on n, grain and the thread count. Which thread runs a chunk is decided at run time
// (threads claim chunks from a shared ticket), so a descheduled worker never stalls the
// caller: the caller takes its chunks. Kernels must therefore compute each output the same
// way whichever thread runs it (they do: see kernels/cpu/dot.h). Workers spin briefly before
// sleeping, because decode issues thousands of tiny parallel regions per second and a futex
// wake per region would dominate.
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

  // Runs fn(thread_index) once on every thread (thread_index in [0, num_threads())), each
  // on its own thread: for benchmarks that must load every core.
  void run_on_all(const std::function<void(size_t)>& fn);

  // The pool kernels use: the process-wide one, or the pool a Use scope installed on this thread.
  static ThreadPool& global();
  // Makes `pool` this thread's global() for one scope: tensor-parallel ranks on the CPU run in
  // threads of their own, each with its own workers (a pool has one caller at a time).
  class Use {
   public:
    explicit Use(ThreadPool& pool);
    ~Use();
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    ThreadPool* previous_;
  };

 private:
  void worker_loop();
  // Claims and runs chunks of the current task until none is left.
  void run_chunks();
  void publish(const std::function<void(size_t)>* chunk_fn, uint32_t num_chunks, bool pinned);

  // ticket_ = generation (24 bits) | num_chunks (20 bits) | next chunk (20 bits): one atomic
  // word so a late worker can never claim a chunk of a task it has not seen.
  static constexpr int kChunkBits = 20;
  std::vector<std::thread> workers_;
  const std::function<void(size_t)>* task_ = nullptr;
  // run_on_all: chunk i belongs to thread i. Atomic: a worker late out of the previous task reads
  // it (with a stale ticket whose claim then fails) while publish() sets it for the next one
  // (ThreadSanitizer's report in the engine tests, bench/results/reliability3-24ba4e0.md).
  std::atomic<bool> pinned_{false};
  std::atomic<uint64_t> ticket_{0};
  std::atomic<uint32_t> done_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
};

}  // namespace tachyon
