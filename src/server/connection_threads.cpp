#include "server/connection_threads.h"

#include <utility>

#include "base/error.h"

namespace tachyon::server {

ConnectionThreads::ConnectionThreads(size_t max_threads, size_t connections_per_thread)
    : max_threads_(max_threads), connections_per_thread_(connections_per_thread) {
  TACHYON_CHECK(max_threads > 0 && connections_per_thread > 0,
                "connection threads: max_threads ({}) and connections_per_thread ({}) must be positive", max_threads,
                connections_per_thread);
}

ConnectionThreads::~ConnectionThreads() { shutdown(); }

void ConnectionThreads::start_thread_locked() {
  threads_.emplace_front();
  const auto self = threads_.begin();
  // The element is filled while the lock is held: the new thread reads it only under the lock.
  try {
    *self = std::thread([this, self] { work(self); });
  } catch (...) {  // no thread to be had (system limits): no empty element may wait to be joined
    threads_.erase(self);
    throw;
  }
  ++started_;
}

void ConnectionThreads::enqueue(std::function<void()> connection) {
  std::list<std::thread> exited;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw Error("connection threads: enqueue after shutdown");
    queue_.push_back(std::move(connection));
    exited.swap(retired_);
    if (idle_ >= queue_.size() || threads_.size() >= max_threads_) {
      wake_.notify_one();
    } else {
      try {
        start_thread_locked();
      } catch (...) {
        // With no thread at all nothing would ever serve it: the caller hears of it. Otherwise it
        // waits for a running thread, as over max_threads.
        if (threads_.empty()) {
          queue_.pop_back();
          throw;
        }
      }
    }
  }
  // Threads that left have released the lock for good: joining them frees their stacks.
  for (std::thread& t : exited) t.join();
}

void ConnectionThreads::work(std::list<std::thread>::iterator self) {
  std::unique_lock lock(mutex_);
  for (size_t served = 0;;) {
    ++idle_;
    wake_.wait(lock, [&] { return !queue_.empty() || stopping_; });
    --idle_;
    if (queue_.empty()) break;  // stopping, nothing left to serve
    std::function<void()> connection = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    connection();
    connection = nullptr;  // what the connection captured goes before the lock is taken again
    lock.lock();
    // While stopping, every thread serves until the queue is empty.
    if (++served >= connections_per_thread_ && !stopping_) break;
  }
  // Leaving: a fresh thread takes this one's place unless the pool is stopping; thread-local
  // state and the allocator's per-thread cache are released as this thread exits, and the
  // next enqueue (or shutdown) joins it.
  retired_.splice(retired_.end(), threads_, self);
  if (!stopping_) {
    try {
      start_thread_locked();
    } catch (...) {  // one thread fewer until the next enqueue starts one
    }
  }
  exited_.notify_all();
}

void ConnectionThreads::shutdown() {
  std::unique_lock lock(mutex_);
  stopping_ = true;
  wake_.notify_all();
  exited_.wait(lock, [&] { return threads_.empty(); });
  std::list<std::thread> exited;
  exited.swap(retired_);
  lock.unlock();
  for (std::thread& t : exited) t.join();
}

size_t ConnectionThreads::threads_started() const {
  std::lock_guard lock(mutex_);
  return started_;
}

size_t ConnectionThreads::threads_running() const {
  std::lock_guard lock(mutex_);
  return threads_.size();
}

size_t ConnectionThreads::threads_idle() const {
  std::lock_guard lock(mutex_);
  return idle_;
}

}  // namespace tachyon::server
