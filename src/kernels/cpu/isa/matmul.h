// ISA-specific matmul and dot kernels, selected at run time by CPU features.
#pragma once

#include <cstdint>

#include "kernels/weight.h"

namespace tachyon::kernels::cpu {

// out[m, n] = dot(x[m, :], w[n, :]) for m in [0, rows), n in [n_begin, n_end); `ldo` is out's
// row stride. No bias. Reduction order: cpu/dot.h.
using MatmulRangeFn = void (*)(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end,
                               float* out, int64_t ldo);
using DotF32Fn = float (*)(const float* a, const float* b, int64_t k);

void matmul_range_portable(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                           int64_t ldo);
float dot_f32_portable(const float* a, const float* b, int64_t k);

#if defined(__x86_64__)
void matmul_range_avx2(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                       int64_t ldo);
float dot_f32_avx2(const float* a, const float* b, int64_t k);
#endif

struct IsaKernels {
  MatmulRangeFn matmul_range;
  DotF32Fn dot_f32;
  const char* name;
};
const IsaKernels& isa_kernels();  // best for this CPU; TACHYON_ISA=portable forces the fallback

}  // namespace tachyon::kernels::cpu
