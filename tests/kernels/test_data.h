// Shared by the kernel tests: random inputs and the max-norm relative error.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace tachyon::kernels {

inline std::vector<float> random_vec(size_t n, std::mt19937& rng, float sd = 1.f) {
  std::normal_distribution<float> dist(0.f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// max|a − b| / max|b| over n elements.
inline double max_rel(const float* a, const float* b, size_t n) {
  double d = 0, s = 1e-30;
  for (size_t i = 0; i < n; ++i) {
    d = std::max(d, std::fabs(double(a[i]) - b[i]));
    s = std::max(s, std::fabs(double(b[i])));
  }
  return d / s;
}
// The same over two vectors; infinite when their sizes differ.
inline double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() ? max_rel(a.data(), b.data(), a.size()) : INFINITY;
}

// Whether two vectors hold the same floats, bit for bit.
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace tachyon::kernels
