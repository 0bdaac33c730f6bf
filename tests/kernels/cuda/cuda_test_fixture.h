// Shared by the CUDA kernel tests: the norm-wise error (random data: test_data.h), and a
// fixture holding the CUDA and reference backends (skips when no GPU is visible).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "base/dtype.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device_arch.h"
#include "../test_data.h"

namespace tachyon::kernels {

// ‖a − b‖ / ‖b‖ (METHOD: the norm-wise error; bf16 operands land near 1e-3..1e-2).
inline double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, s = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    s += double(b[i]) * b[i];
  }
  return std::sqrt(d / s);
}

// The skip of a test of a Hopper-only kernel where the pre-Hopper kernels run (the GPU, a
// compute_80-PTX build, or TACHYON_CUDA_ARCH): those kernels are never launched there.
#define TACHYON_SKIP_WITHOUT_HOPPER_KERNELS()                                                       \
  if (!cuda::device_arch().hopper)                                                               \
  GTEST_SKIP() << "the Hopper-only kernels do not run here (TACHYON_CUDA_ARCH, a pre-Hopper GPU " \
                  "or a compute_80 PTX build)"

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
    gpu = make_backend("cuda");
    ref = make_backend("reference");
  }
  void TearDown() override {
    if (gpu)
      for (void* p : buffers_) gpu->deallocate(p);
  }
  // Device copy of `v` (freed at teardown).
  template <typename T>
  T* upload(const std::vector<T>& v) {
    auto* p = static_cast<T*>(gpu->allocate(v.size() * sizeof(T)));
    gpu->copy_to_device(p, v.data(), v.size() * sizeof(T));
    buffers_.push_back(p);
    return p;
  }
  // Device buffer of n floats poisoned with NaN, so an unwritten output fails the test.
  float* poisoned(size_t n) { return upload(std::vector<float>(n, NAN)); }
  std::vector<float> download(const float* p, size_t n) {
    std::vector<float> v(n);
    gpu->copy_to_host(v.data(), p, n * sizeof(float));
    return v;
  }

  std::unique_ptr<Backend> gpu, ref;
  std::mt19937 rng{7};
  std::vector<void*> buffers_;
};

// A CUDA backend with the default options changed by `change` (cuda_options.h): a path or fusion
// switched off, for tests that hold the default to its bits (a forced arch, TACHYON_CUDA_ARCH,
// stays: it is process-wide).
template <typename Change>
std::unique_ptr<Backend> cuda_backend_with(Change change) {
  CudaOptions options;
  change(options);
  return make_cuda_backend(options);
}

// Float buffers on one backend (the fixture's own are on `gpu`), NaN-poisoned or copied from the
// host, freed with this object.
class DeviceFloats {
 public:
  explicit DeviceFloats(Backend& be) : be_(be) {}
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  ~DeviceFloats() {
    for (void* p : buffers_) be_.deallocate(p);
  }
  float* poisoned(int64_t n) { return copy(std::vector<float>(static_cast<size_t>(n), NAN)); }
  float* copy(const std::vector<float>& v) {
    buffers_.push_back(be_.allocate(v.size() * sizeof(float)));
    be_.copy_to_device(buffers_.back(), v.data(), v.size() * sizeof(float));
    return static_cast<float*>(buffers_.back());
  }
  std::vector<float> download(const float* p, int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    be_.copy_to_host(v.data(), p, v.size() * sizeof(float));
    return v;
  }

 private:
  Backend& be_;
  std::vector<void*> buffers_;
};

inline std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float x : v) out.push_back(f32_to_bf16(x));
  return out;
}

}  // namespace tachyon::kernels
