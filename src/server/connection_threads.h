// The threads that serve HTTP connections: each queued connection is handed to an idle thread,
// a new one is started while fewer than `max_threads` run, and a thread that has served
// `connections_per_thread` connections exits and is replaced by a fresh one.
//
// Why replaced: a connection thread keeps memory of its own after every request it served,
// glibc's per-thread cache of freed chunks (tcache: up to 7 chunks of each of 64 sizes, counted
// as in use) and the thread-local scratch of the tokenizer and the regex engine. With 128 threads
// each meeting new request shapes for hours, that grew the server's heap through a whole 10-minute
// soak (bench/results/reliability3-24ba4e0.md: the arenas grew +3.2 MiB over minutes 1-3, +0.8 MiB with
// glibc's tcache off). A thread that exits hands its cache back to the allocator and runs its
// thread-local destructors, so what the threads keep is bounded by what `connections_per_thread`
// requests leave behind instead of by everything the thread ever served.
// Threads start on demand: an idle server holds none beyond the ones it has needed.
//
//   ConnectionThreads threads(144, 8);
//   threads.enqueue([socket] { serve(socket); });
//   threads.shutdown();   // the queued connections are still served, then every thread is joined
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

namespace tachyon::server {

class ConnectionThreads {
 public:
  ConnectionThreads(size_t max_threads, size_t connections_per_thread);
  ~ConnectionThreads();  // shuts down
  ConnectionThreads(const ConnectionThreads&) = delete;
  ConnectionThreads& operator=(const ConnectionThreads&) = delete;

  void enqueue(std::function<void()> connection);
  // Serves what is queued, then joins every thread; enqueue after it throws.
  void shutdown();

  // Threads started so far (replacements included), running now, and waiting for a connection.
  size_t threads_started() const;
  size_t threads_running() const;
  size_t threads_idle() const;

 private:
  void work(std::list<std::thread>::iterator self);
  void start_thread_locked();

  const size_t max_threads_;
  const size_t connections_per_thread_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;    // a connection is queued, or shutdown
  std::condition_variable exited_;  // a thread left threads_
  std::deque<std::function<void()>> queue_;
  std::list<std::thread> threads_;  // running (each thread knows its own element)
  std::list<std::thread> retired_;  // left (or leaving) work(), to be joined
  size_t idle_ = 0;
  size_t started_ = 0;
  bool stopping_ = false;
};

}  // namespace tachyon::server
