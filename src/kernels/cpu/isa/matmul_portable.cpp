#include <cstdlib>
#include <cstring>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/isa/matmul.h"

namespace tachyon::kernels::cpu {

void matmul_range_portable(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                           int64_t ldo) {
  const int64_t k = w.cols;
  for (int64_t n = n_begin; n < n_end; ++n) {
    for (int64_t m = 0; m < rows; ++m) {
      const float* xr = x + m * k;
      float r = 0;
      switch (w.dtype) {
        case DType::F32: {
          const float* wr = static_cast<const float*>(w.data) + n * k;
          r = dot_portable(xr, [&](int64_t i) { return wr[i]; }, k);
          break;
        }
        case DType::BF16: {
          const uint16_t* wr = static_cast<const uint16_t*>(w.data) + n * k;
          r = dot_portable(xr, [&](int64_t i) { return tachyon::bf16_to_f32(wr[i]); }, k);
          break;
        }
        case DType::F16: {
          const uint16_t* wr = static_cast<const uint16_t*>(w.data) + n * k;
          r = dot_portable(xr, [&](int64_t i) { return tachyon::f16_to_f32(wr[i]); }, k);
          break;
        }
        default:
          std::abort();  // weights are validated at load
      }
      out[m * ldo + n] = r;
    }
  }
}

float dot_f32_portable(const float* a, const float* b, int64_t k) {
  return dot_portable(a, [&](int64_t i) { return b[i]; }, k);
}

const IsaKernels& isa_kernels() {
  static const IsaKernels kernels = [] {
    const char* forced = std::getenv("TACHYON_ISA");
    const bool portable = forced && std::strcmp(forced, "portable") == 0;
#if defined(__x86_64__)
    if (!portable && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
      return IsaKernels{matmul_range_avx2, dot_f32_avx2, "avx2"};
#endif
    (void)portable;
    return IsaKernels{matmul_range_portable, dot_f32_portable, "portable"};
  }();
  return kernels;
}

}  // namespace tachyon::kernels::cpu
