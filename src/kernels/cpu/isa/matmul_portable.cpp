#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/isa/cpu_features.h"
#include "kernels/cpu/isa/matmul.h"
#include "kernels/reference/rowwise.h"

namespace tachyon::kernels::cpu {

void matmul_range_portable(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                           int64_t ldo) {
  if (w.quantized()) return matmul_quant_portable(x, rows, w, n_begin, n_end, out, ldo);
  const int64_t k = w.cols;
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t n = n_begin; n < n_end; ++n) {
      float acc = 0.f;
      for (int64_t t = 0; t < k; ++t) acc = std::fma(x[m * k + t], rowwise::load_element(w, w.index_of(n, t)), acc);
      out[m * ldo + n] = acc;
    }
  scale_i8_outputs(w, rows, n_begin, n_end, out, ldo);
}

float dot_f32_portable(const float* a, const float* b, int64_t k) { return dot_f32_portable_inline(a, b, k); }

int64_t panel64_padded_rows(int64_t rows) { return (rows + Weight::kPanel - 1) / Weight::kPanel * Weight::kPanel; }

void pack_panel64(const Weight& w, void* dst) {
  const size_t esize = dtype_size(w.dtype);
  const int64_t padded = panel64_padded_rows(w.rows);
  std::memset(dst, 0, static_cast<size_t>(padded * w.cols) * esize);
  Weight packed = w;
  packed.layout = WeightLayout::Panel64;
  const char* src = static_cast<const char*>(w.data);
  char* out = static_cast<char*>(dst);
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < w.cols; ++c)
      std::memcpy(out + packed.index_of(r, c) * esize, src + (r * w.cols + c) * esize, esize);
}

IsaCeiling isa_ceiling() {
  static const IsaCeiling ceiling = [] {
    const char* forced = std::getenv("TACHYON_ISA");
    if (forced == nullptr) return IsaCeiling::Any;
    if (std::strcmp(forced, "portable") == 0) return IsaCeiling::Portable;
    if (std::strcmp(forced, "avx2") == 0) return IsaCeiling::Avx2;
    if (std::strcmp(forced, "avx512") == 0) return IsaCeiling::Avx512;
    return IsaCeiling::Any;
  }();
  return ceiling;
}

const IsaKernels& isa_kernels() {
  static const IsaKernels kernels = [] {
    const IsaCeiling ceiling = isa_ceiling();
#if defined(__x86_64__)
    if (ceiling >= IsaCeiling::Avx512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c())
      return IsaKernels{matmul_range_avx512, dot_f32_avx2, attend_items_avx512, top_two_row_avx512, "avx512"};
    if (ceiling >= IsaCeiling::Avx2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c())
      return IsaKernels{matmul_range_avx2, dot_f32_avx2, attend_items_avx2, top_two_row_avx2, "avx2"};
#endif
    (void)ceiling;
    return IsaKernels{matmul_range_portable, dot_f32_portable, attend_items_portable, top_two_row_portable, "portable"};
  }();
  return kernels;
}

}  // namespace tachyon::kernels::cpu
