// What the CUDA benchmarks share to time backend calls and feed them: wall time of synchronised
// calls, and normal random floats in backend memory.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "base/dtype.h"
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

// A [rows, cols] bf16 matrix of uniform values in ±0.03 (xorshift from `seed`), uploaded.
inline tachyon::kernels::Weight random_weight(tachyon::kernels::Backend& be, int64_t rows, int64_t cols, uint32_t seed) {
  std::vector<uint16_t> host(static_cast<size_t>(rows * cols));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (uint16_t& x : host) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x = tachyon::f32_to_bf16((static_cast<float>(s >> 40) / 16777216.f * 2.f - 1.f) * 0.03f);
  }
  return be.upload_weight(tachyon::kernels::Weight{host.data(), tachyon::DType::BF16, rows, cols});
}
