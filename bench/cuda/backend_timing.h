// What the CUDA benchmarks share to time backend calls and feed them: wall time of synchronised
// calls, and normal random floats in backend memory.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/backend.h"

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median over 5 repetitions of the wall time of `iters` calls of f, the backend synchronised
// (one call before, as a warm-up).
template <typename F>
double time_calls(tachyon::kernels::Backend& backend, F&& f, int iters) {
  f();
  backend.synchronize();
  std::vector<double> t;
  for (int r = 0; r < 5; ++r) {
    const double t0 = now();
    for (int i = 0; i < iters; ++i) f();
    backend.synchronize();
    t.push_back((now() - t0) / iters);
  }
  return median(t);
}

// `count` floats drawn from N(0, sd²) with `seed`, in backend memory (deallocate them).
inline float* random_device_floats(tachyon::kernels::Backend& backend, size_t count, uint32_t seed, float sd = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, sd);
  std::vector<float> host(count);
  for (float& x : host) x = dist(rng);
  auto* p = static_cast<float*>(backend.allocate(count * sizeof(float)));
  backend.copy_to_device(p, host.data(), count * sizeof(float));
  return p;
}
