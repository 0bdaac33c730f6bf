// The connection threads (src/server/connection_threads.h): every connection is served, never by
// more than max_threads at once, threads start on demand, a thread leaves after its quota of
// connections (its thread-local state destroyed) and a fresh one takes its place, and shutdown
// serves what is queued before joining.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "base/error.h"
#include "server/connection_threads.h"

namespace tachyon::server {
namespace {

// Thread-local state with a destructor, as the tokenizer's scratch: counts the threads that
// released theirs.
std::atomic<int> released{0};
struct PerThreadScratch {
  int served = 0;
  ~PerThreadScratch() { released.fetch_add(1); }
};
thread_local PerThreadScratch scratch;

// A gate the test opens: connections wait on it so that several are in flight together.
class Gate {
 public:
  void wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return open_; });
  }
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST(ConnectionThreads, ServesEveryConnectionWithAtMostMaxThreadsAtOnce) {
  std::atomic<int> in_flight{0}, most{0}, done{0};
  Gate gate;
  {
    ConnectionThreads threads(4, 3);
    for (int i = 0; i < 40; ++i)
      threads.enqueue([&] {
        const int now = in_flight.fetch_add(1) + 1;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        gate.wait();
        in_flight.fetch_sub(1);
        done.fetch_add(1);
      });
    EXPECT_LE(threads.threads_running(), 4u);
    gate.open();
    threads.shutdown();
    EXPECT_EQ(threads.threads_running(), 0u);
  }
  EXPECT_EQ(done.load(), 40);
  EXPECT_LE(most.load(), 4);
  EXPECT_GE(most.load(), 1);
}

TEST(ConnectionThreads, AThreadLeavesAfterItsQuotaAndReleasesItsThreadLocals) {
  released = 0;
  std::vector<int> served_by_thread;  // each connection: how many its thread had served, itself included
  std::mutex m;
  ConnectionThreads threads(1, 2);
  for (int i = 0; i < 7; ++i)
    threads.enqueue([&] {
      std::lock_guard lock(m);
      served_by_thread.push_back(++scratch.served);
    });
  // Shutdown lifts the quota (every thread serves until the queue is empty): wait for all first.
  for (;;) {
    std::lock_guard lock(m);
    if (served_by_thread.size() == 7) break;
  }
  threads.shutdown();
  ASSERT_EQ(served_by_thread.size(), 7u);
  // One thread at a time, two connections each: 1, 2, 1, 2, 1, 2, 1.
  EXPECT_EQ(served_by_thread, (std::vector<int>{1, 2, 1, 2, 1, 2, 1}));
  EXPECT_EQ(threads.threads_started(), 4u);
  EXPECT_EQ(released.load(), 4);  // every thread's thread-local state went with it
}

TEST(ConnectionThreads, StartsThreadsOnlyWhenNoneIsIdle) {
  ConnectionThreads threads(16, 100);
  std::atomic<int> done{0};
  for (int i = 0; i < 5; ++i) {
    threads.enqueue([&] { done.fetch_add(1); });
    while (done.load() != i + 1 || threads.threads_idle() != 1) std::this_thread::yield();
  }
  // One connection at a time: the first thread served them all (it was idle for each next one).
  EXPECT_EQ(threads.threads_started(), 1u);
  threads.shutdown();
}

TEST(ConnectionThreads, ShutdownServesWhatIsQueuedThenRefusesMore) {
  std::atomic<int> done{0};
  Gate gate;
  ConnectionThreads threads(2, 1);
  threads.enqueue([&] {
    gate.wait();
    done.fetch_add(1);
  });
  for (int i = 0; i < 9; ++i) threads.enqueue([&] { done.fetch_add(1); });
  gate.open();
  threads.shutdown();
  EXPECT_EQ(done.load(), 10);
  EXPECT_THROW(threads.enqueue([] {}), Error);
  EXPECT_THROW(ConnectionThreads(0, 1), Error);
}

}  // namespace
}  // namespace tachyon::server
