// Quantized matmul without SIMD: each output's weights are dequantized by the scalar definition
// (kernels/weight_dequant.h, row-major or Panel64) into a row, then every row of x runs the
// canonical chain over it (cpu/dot.h). The bits every ISA path reproduces.
#include <cmath>
#include <vector>

#include "kernels/cpu/isa/matmul.h"
#include "kernels/weight_dequant.h"

namespace tachyon::kernels::cpu {

void matmul_quant_portable(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                           int64_t ldo) {
  const int64_t k = w.cols;
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(k));
  for (int64_t n = n_begin; n < n_end; ++n) {
    for (int64_t t = 0; t < k; ++t) row[t] = dequantize_element(w, n, t);
    for (int64_t m = 0; m < rows; ++m) {
      float acc = 0.f;
      for (int64_t t = 0; t < k; ++t) acc = std::fma(x[m * k + t], row[t], acc);
      out[m * ldo + n] = acc;
    }
  }
}

}  // namespace tachyon::kernels::cpu
