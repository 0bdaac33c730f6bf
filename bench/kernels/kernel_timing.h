// The clocks and the best-of-N timing of the CPU kernel benchmarks.
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>

namespace tachyon::bench {

inline double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// CPU time of the calling thread: what a single-threaded kernel costs however busy the machine is.
inline double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The fastest of `runs` calls of fn after one warm-up call, on `clock` (wall time by default).
template <class Fn, class Clock = double (*)()>
double time_min(int runs, Fn&& fn, Clock clock = wall_seconds) {
  fn();  // warm-up
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    const double t0 = clock();
    fn();
    best = std::min(best, clock() - t0);
  }
  return best;
}

}  // namespace tachyon::bench
