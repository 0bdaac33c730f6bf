#include "base/thread_pool.h"

#include <algorithm>
#include <cstdlib>

#include "base/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define TACHYON_PAUSE() _mm_pause()
#else
#define TACHYON_PAUSE() ((void)0)
#endif

namespace tachyon {

namespace {
constexpr int kSpinIterations = 1 << 15;
constexpr uint64_t kMask = (uint64_t{1} << 20) - 1;
thread_local size_t tls_thread_index = 0;
}  // namespace

ThreadPool::ThreadPool(size_t num_threads) {
  if (num_threads == 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  for (size_t i = 1; i < num_threads; ++i)
    workers_.emplace_back([this, i] {
      tls_thread_index = i;
      worker_loop();
    });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_.store(true);
    ticket_.fetch_add(uint64_t{1} << (2 * kChunkBits));
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::run_chunks() {
  for (;;) {
    uint64_t t = ticket_.load(std::memory_order_acquire);
    const uint64_t num_chunks = (t >> kChunkBits) & kMask, next = t & kMask;
    if (next >= num_chunks) return;
    if (pinned_.load(std::memory_order_relaxed) && tls_thread_index != next) {  // run_on_all: wait for this thread's own slot
      if (tls_thread_index < next || tls_thread_index >= num_chunks) return;
      TACHYON_PAUSE();
      continue;
    }
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel)) continue;
    (*task_)(next);
    done_.fetch_add(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;  // generation 0 is the pool's construction: every later task is new
  for (;;) {
    int spins = 0;
    auto generation = [&] { return ticket_.load(std::memory_order_acquire) >> (2 * kChunkBits); };
    while (generation() == seen && spins < kSpinIterations) {
      TACHYON_PAUSE();
      ++spins;
    }
    if (generation() == seen) {
      std::unique_lock lock(mutex_);
      sleepers_.fetch_add(1);
      // seq_cst pairs with publish(): either it sees a sleeper or this sees the new ticket.
      wake_.wait(lock, [&] { return (ticket_.load(std::memory_order_seq_cst) >> (2 * kChunkBits)) != seen; });
      sleepers_.fetch_sub(1);
    }
    seen = generation();
    if (stop_.load()) return;
    run_chunks();
  }
}

void ThreadPool::publish(const std::function<void(size_t)>* chunk_fn, uint32_t num_chunks, bool pinned) {
  TACHYON_CHECK(num_chunks <= kMask, "too many chunks");
  task_ = chunk_fn;
  pinned_.store(pinned, std::memory_order_relaxed);  // published by the seq_cst ticket store below
  done_.store(0, std::memory_order_relaxed);
  const uint64_t generation = (ticket_.load() >> (2 * kChunkBits)) + 1;
  ticket_.store((generation << (2 * kChunkBits)) | (uint64_t{num_chunks} << kChunkBits), std::memory_order_seq_cst);
  if (sleepers_.load() > 0) {
    std::lock_guard lock(mutex_);
    wake_.notify_all();
  }
  run_chunks();
  while (done_.load(std::memory_order_acquire) != num_chunks) TACHYON_PAUSE();
}

void ThreadPool::run_on_all(const std::function<void(size_t)>& fn) {
  if (workers_.empty()) {
    fn(0);
    return;
  }
  publish(&fn, static_cast<uint32_t>(num_threads()), /*pinned=*/true);
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, size_t grain) {
  if (n == 0) return;
  const size_t threads = num_threads();
  grain = std::max<size_t>(grain, 1);
  if (threads == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  const size_t chunks = std::min(threads * 4, (n + grain - 1) / grain);
  const std::function<void(size_t)> chunk_fn = [&](size_t c) {
    const size_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    if (begin < end) fn(begin, end);
  };
  publish(&chunk_fn, static_cast<uint32_t>(chunks), /*pinned=*/false);
}

namespace {
thread_local ThreadPool* current_override = nullptr;
}  // namespace

ThreadPool::Use::Use(ThreadPool& pool) : previous_(current_override) { current_override = &pool; }
ThreadPool::Use::~Use() { current_override = previous_; }

ThreadPool& ThreadPool::global() {
  if (current_override) return *current_override;
  // TACHYON_THREADS overrides the core count (e.g. to leave cores to other processes).
  static ThreadPool pool([] {
    const char* env = std::getenv("TACHYON_THREADS");
    return env ? static_cast<size_t>(std::max(0, std::atoi(env))) : size_t{0};
  }());
  return pool;
}

}  // namespace tachyon
