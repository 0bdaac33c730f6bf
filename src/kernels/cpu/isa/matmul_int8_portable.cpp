// Activation quantization, the portable int8-activation matmul (the bits every ISA path
// reproduces, cpu/isa/matmul_int8.h) and the choice of kernel for this CPU. Compiled with
// -ffp-contract=off: the rounding trick below must not become an fma.
#include "kernels/cpu/isa/matmul_int8.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "kernels/cpu/isa/cpu_features.h"
#include "kernels/cpu/isa/matmul.h"
#include "kernels/cpu/quant_pack.h"
#include "kernels/weight_dequant.h"

namespace tachyon::kernels::cpu {

void quantize_blocks_portable(const float* x, int64_t blocks, int64_t block, int8_t* q, float* scale, int32_t* sum,
                              float* scaled_sum) {
  for (int64_t i = 0; i < blocks; ++i) {
    const float* xb = x + i * block;
    float amax = 0.f;
    for (int64_t t = 0; t < block; ++t) amax = std::max(amax, std::fabs(xb[t]));
    // As llama.cpp's quantize_row_q8_0, except that d stays f32 (llama.cpp stores it as f16,
    // subnormal below 6e-5: measured farther from llama.cpp's own logits on the gemma3 fixture).
    const float d = amax / 127.f, inverse = d != 0.f ? 1.f / d : 0.f;
    int8_t* qb = q + i * block;
    int32_t total = 0;
    for (int64_t t = 0; t < block; ++t) {
      // Round to nearest even by the 1.5·2^23 trick (|v| <= 127.5): the same bits as vcvtps2dq.
      const float v = xb[t] * inverse;
      const float rounded = (v + 12582912.f) - 12582912.f;
      const int32_t code = std::clamp(static_cast<int32_t>(rounded), -127, 127);
      qb[t] = static_cast<int8_t>(code);
      total += code;
    }
    scale[i] = d;
    sum[i] = total;
    scaled_sum[i] = d * static_cast<float>(total);
  }
}

namespace {
QuantizeBlocksFn quantize_blocks_kernel() {
  static const QuantizeBlocksFn quantize_blocks = [] {
#if defined(__x86_64__)
    if (isa_ceiling() >= IsaCeiling::Avx512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
      return quantize_blocks_avx512;
#endif
    return quantize_blocks_portable;
  }();
  return quantize_blocks;
}
}  // namespace

Int8Rows Int8Activations::prepare(int64_t rows, int64_t cols, int64_t block) {
  if (block % kInt8MinBlock != 0 || block > kInt8MaxBlock || cols % block != 0) std::abort();
  const int64_t blocks = cols / block;
  q_.resize(static_cast<size_t>(rows * cols));
  scale_.resize(static_cast<size_t>(rows * blocks));
  sum_.resize(scale_.size());
  scaled_sum_.resize(scale_.size());
  return Int8Rows{q_.data(), scale_.data(), sum_.data(), scaled_sum_.data(), rows, cols, block};
}

void Int8Activations::quantize_rows(const float* x, const Int8Rows& v, int64_t first, int64_t count) {
  const int64_t blocks = v.blocks();
  quantize_blocks_kernel()(x + first * v.cols, count * blocks, v.block, q_.data() + first * v.cols,
                           scale_.data() + first * blocks, sum_.data() + first * blocks,
                           scaled_sum_.data() + first * blocks);
}

Int8Rows Int8Activations::quantize(const float* x, int64_t rows, int64_t cols, int64_t block) {
  const Int8Rows view = prepare(rows, cols, block);
  quantize_rows(x, view, 0, rows);
  return view;
}

int64_t int8_activation_block(const Weight& w) {
  const int64_t group = w.format == WeightFormat::Dense ? w.cols : w.quant.group;
  for (int64_t block = kInt8MaxBlock; block > kInt8MinBlock; block /= 2)
    if (group % block == 0) return block;
  return kInt8MinBlock;
}

bool int8_dot_eligible(const Weight& w) {
  if (w.layout != WeightLayout::RowMajor || w.rows <= 1 || w.cols % kInt8Block != 0) return false;
  if (w.format == WeightFormat::Dense) return w.dtype == DType::I8 && w.scales != nullptr;
  if (w.format != WeightFormat::Symmetric && w.format != WeightFormat::Affine) return false;
  const DType s = w.quant.scale_dtype;
  return (w.quant.bits == 4 || w.quant.bits == 8) && w.quant.group > 0 && w.quant.group % kInt8MinBlock == 0 &&
         (s == DType::F32 || s == DType::F16 || s == DType::BF16);
}

void matmul_int8_portable(const Int8Rows& a, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                          int64_t ldo) {
  if (w.layout != WeightLayout::Panel64Dot || w.quant.group % a.block != 0) std::abort();
  const int64_t k = w.cols, blocks = a.blocks(), bw = a.block;
  const bool affine = w.format == WeightFormat::Affine;
  thread_local std::vector<int32_t> codes;
  codes.resize(static_cast<size_t>(k));
  for (int64_t n = n_begin; n < n_end; ++n) {
    // The signed code (Symmetric) or the unsigned one (Affine) of every k.
    for (int64_t t = 0; t < k; ++t) {
      const uint32_t c = code_at(w, n, t);
      codes[t] = !affine ? (w.quant.bits >= 6 ? static_cast<int8_t>(c) : static_cast<int32_t>(c ^ 8u) - 8)
                         : static_cast<int32_t>(c);
    }
    for (int64_t m = 0; m < a.rows; ++m) {
      const int8_t* q = a.q + m * k;
      float acc = 0.f;
      for (int64_t b = 0; b < blocks; ++b) {
        int32_t isum = 0;
        for (int64_t t = b * bw; t < (b + 1) * bw; ++t) isum += codes[t] * q[t];
        const float scale = group_value(w, w.quant.scales, n, b * bw);
        acc = std::fma(scale * a.scale[m * blocks + b], static_cast<float>(isum), acc);
        if (affine) acc = std::fma(group_value(w, w.quant.biases, n, b * bw), a.scaled_sum[m * blocks + b], acc);
      }
      out[m * ldo + n] = acc;
    }
  }
}

namespace {
#if defined(__x86_64__)
// AMX tiles for standard weights; a compact one (cpu/quant_pack.h) runs them over a standard copy
// of its panels when there are rows enough to fill one, else the VNNI kernel reads it as it is.
// 16-column activation blocks (Q6_K's groups) have no tile path: VNNI.
void matmul_int8_amx_any(const Int8Rows& a, const Weight& w, int64_t n_begin, int64_t n_end, float* out, int64_t ldo) {
  if (a.block < kInt8Block) return matmul_int8_avx512(a, w, n_begin, n_end, out, ldo);
  if (!compact_dot_weight(w)) return matmul_int8_amx(a, w, n_begin, n_end, out, ldo);
  if (a.rows < kAmxTileRows) return matmul_int8_avx512(a, w, n_begin, n_end, out, ldo);
  thread_local StandardPanels standard;
  const Weight view = expand_panel64_dot(w, n_begin, n_end, standard);
  matmul_int8_amx(a, view, 0, view.rows, out + n_begin, ldo);
}
#endif

struct Int8Choice {
  MatmulInt8Fn fn;
  const char* name;
};
const Int8Choice& int8_choice() {
  static const Int8Choice choice = []() -> Int8Choice {
    const IsaCeiling ceiling = isa_ceiling();
#if defined(__x86_64__)
    if (ceiling >= IsaCeiling::Avx512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") && cpu_has_f16c()) {
      if (ceiling == IsaCeiling::Any && amx_int8_enabled()) return {matmul_int8_amx_any, "amx-int8"};
      return {matmul_int8_avx512, "avx512-vnni"};
    }
    if (ceiling >= IsaCeiling::Avx2 && __builtin_cpu_supports("avx2") && cpu_has_f16c()) return {matmul_int8_avx2, "avx2"};
#endif
    (void)ceiling;
    return {matmul_int8_portable, "portable"};
  }();
  return choice;
}
}  // namespace

MatmulInt8Fn matmul_int8_kernel() { return int8_choice().fn; }
const char* matmul_int8_kernel_name() { return int8_choice().name; }

}  // namespace tachyon::kernels::cpu
