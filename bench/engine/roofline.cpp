#include "roofline.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <vector>

#include "base/thread_pool.h"

namespace tachyon::bench {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <typename F>
double best_of(int runs, F&& f) {
  double best = 1e30;
  for (int r = 0; r < runs; ++r) best = std::min(best, f());
  return best;
}

__attribute__((target("avx2,fma"))) float fma_kernel(long iterations) {
  __m256 a0 = _mm256_set1_ps(1.f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0;
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < iterations; ++i) {
    a0 = _mm256_fmadd_ps(a0, m, c); a1 = _mm256_fmadd_ps(a1, m, c); a2 = _mm256_fmadd_ps(a2, m, c);
    a3 = _mm256_fmadd_ps(a3, m, c); a4 = _mm256_fmadd_ps(a4, m, c); a5 = _mm256_fmadd_ps(a5, m, c);
    a6 = _mm256_fmadd_ps(a6, m, c); a7 = _mm256_fmadd_ps(a7, m, c); a8 = _mm256_fmadd_ps(a8, m, c);
    a9 = _mm256_fmadd_ps(a9, m, c);
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                           _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(_mm256_add_ps(a6, a7), _mm256_add_ps(a8, a9))));
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  return out[0];
}

__attribute__((target("avx2"))) double read_kernel(const float* p, size_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_loadu_ps(p + i));
    s1 = _mm256_add_ps(s1, _mm256_loadu_ps(p + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_loadu_ps(p + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_loadu_ps(p + i + 24));
  }
  alignas(32) float out[8];
  _mm256_store_ps(out, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  return out[0];
}

}  // namespace

Ceilings measure_ceilings() {
  ThreadPool& pool = ThreadPool::global();
  const size_t n = size_t{1} << 27;  // 512 MiB of floats per buffer: far beyond the caches
  std::vector<float> a(n, 1.f), b(n, 2.f);
  Ceilings c;
  std::atomic<double> sink{0};
  c.copy_gbps = 2.0 * n * sizeof(float) / 1e9 / best_of(3, [&] {
    auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(n, [&](size_t lo, size_t hi) { std::memcpy(b.data() + lo, a.data() + lo, (hi - lo) * sizeof(float)); });
    return seconds_since(t0);
  });
  c.read_gbps = 1.0 * n * sizeof(float) / 1e9 / best_of(3, [&] {
    auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(n, [&](size_t lo, size_t hi) { sink = sink + read_kernel(a.data() + lo, hi - lo); });
    return seconds_since(t0);
  });
  const long iterations = 50'000'000;
  std::atomic<float> fsink{0};
  c.fma_gflops = static_cast<double>(pool.num_threads()) * iterations * 10 * 8 * 2 / 1e9 / best_of(3, [&] {
    auto t0 = std::chrono::steady_clock::now();
    pool.run_on_all([&](size_t) { fsink = fsink + fma_kernel(iterations); });
    return seconds_since(t0);
  });
  return c;
}

}  // namespace tachyon::bench
