// The int8-activation matmul (the CPU backend's int8-activation mode, kernels/backend.h) over
// Panel64Dot weights (kernels/weight.h): integer formats whose products are integer dot products.
//
// Numerics (llama.cpp's Q8_0 activations, one fixed float order), with B = int8_activation_block(w)
// columns per activation block: the largest of 128, 64, 32 and 16 that divides the weight's group
// (Dense I8: its row), so a block never spans two weight scales (16: Q6_K's groups):
//  - each input row is quantized per block of B columns: d = max|x| / 127, q = clamp(rne(x · (1/d)),
//    ±127) (d = 0: q = 0), d kept in f32; per block sum = Σ q, ds = d · f32(sum) (Int8Activations);
//  - per output (m, n) and block b, in order of b: isum = Σ_k q_w(n, k) · q(m, k), exact in int32
//    (|isum| <= 128 · 127 · 128 < 2^24, so f32(isum) is exact too), where q_w is the signed code
//    (Symmetric) or the unsigned one (Affine); then acc = fma(s · d, f32(isum), acc) and, Affine
//    only, acc = fma(bias, ds, acc), with s and bias the weight's group scale and bias as f32 and
//    acc starting at 0.f. The compact Panel64Dot forms (6-bit codes, factored scales: weight.h)
//    hold the same codes and f32 scales, so they give the same bits. A Dense I8 weight (--quantize int8) is Symmetric 8-bit with one group
//    per row.
// B = 32 (GGUF Q8_0 / Q4_0 and other 32-column groups) is llama.cpp's activation block; wider
// groups take wider blocks (--quantize int8: 128, int4: 64), a coarser activation scale for a
// quarter (half) of the float steps, which bound the AMX path (docs/perf/cpu.md).
// Integer sums do not depend on the order of their terms, so VNNI (vpdpbusd), AVX2 (vpmaddubsw)
// and AMX (tdpbsud) tiles, any tile height and any thread split give these bits: decode, verify
// and prefill rows and every ISA agree inside the mode.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "kernels/weight.h"

namespace tachyon::kernels::cpu {

constexpr int64_t kInt8Block = 32;      // llama.cpp's activation block (columns per int8 scale)
constexpr int64_t kInt8MinBlock = 16;   // the narrowest (16-column groups; not through AMX tiles)
constexpr int64_t kInt8MaxBlock = 128;  // the widest

// Matmul input rows quantized per 32-column block (pointers into an Int8Activations).
struct Int8Rows {
  const int8_t* q = nullptr;           // [rows, cols]
  const float* scale = nullptr;        // [rows, cols / block] d
  const int32_t* sum = nullptr;        // [rows, cols / block] Σ q
  const float* scaled_sum = nullptr;   // [rows, cols / block] d · f32(Σ q)
  int64_t rows = 0, cols = 0;
  int64_t block = kInt8Block;          // columns per scale (B)
  int64_t blocks() const { return cols / block; }
  Int8Rows from(int64_t m) const {
    const int64_t b = m * blocks();
    return Int8Rows{q + m * cols, scale + b, sum + b, scaled_sum + b, rows - m, cols, block};
  }
};

// Owns the buffers (grow-only, reused across calls).
class Int8Activations {
 public:
  // Quantizes rows x [rows, cols] per `block` columns (16, 32, 64 or 128, dividing cols) as the
  // header says.
  Int8Rows quantize(const float* x, int64_t rows, int64_t cols, int64_t block);
  // The same in parts (a prefill's rows split over threads; each block is quantized alone, so the
  // bits do not depend on the split): prepare sizes the buffers for rows x [rows, cols] and returns
  // the view, then quantize_rows fills rows [first, first + count) of it (x: all the rows).
  Int8Rows prepare(int64_t rows, int64_t cols, int64_t block);
  void quantize_rows(const float* x, const Int8Rows& view, int64_t first, int64_t count);

 private:
  std::vector<int8_t> q_;
  std::vector<float> scale_, scaled_sum_;
  std::vector<int32_t> sum_;
};

// Quantizes `blocks` consecutive blocks of `block` values (a multiple of 16) of x as the header
// says (one implementation per ISA, the same bits: a max, one multiply, the round-to-nearest-even
// and a clamp per value).
using QuantizeBlocksFn = void (*)(const float* x, int64_t blocks, int64_t block, int8_t* q, float* scale,
                                  int32_t* sum, float* scaled_sum);
void quantize_blocks_portable(const float* x, int64_t blocks, int64_t block, int8_t* q, float* scale, int32_t* sum,
                              float* scaled_sum);
#if defined(__x86_64__)
void quantize_blocks_avx512(const float* x, int64_t blocks, int64_t block, int8_t* q, float* scale, int32_t* sum,
                            float* scaled_sum);
#endif

// Whether a host (row-major) weight runs in the mode: Symmetric / Affine codes of 4 or 8 bits with
// a group that is a multiple of 16 and F32/F16/BF16 scales, or Dense I8 with row scales; cols a
// multiple of 32. Other weights keep their f32 kernels.
bool int8_dot_eligible(const Weight& host);
// The activation block B of a weight in the mode (host or Panel64Dot): the largest of 128, 64,
// 32 and 16 that divides its group (Dense I8: its row).
int64_t int8_activation_block(const Weight& w);
// The stored-code offset z0 of a Panel64Dot weight (weight.h): 128, 32 (6-bit), 8 or 0.
inline int32_t dot_code_offset(const Weight& w) {
  if (w.format != WeightFormat::Symmetric) return 0;
  return w.quant.bits == 8 ? 128 : w.quant.bits == 6 ? 32 : 8;
}
// A Panel64Dot weight in one of its compact forms (6-bit codes or factored scales, weight.h),
// which only the portable, AVX2 and AVX-512 VNNI kernels read (the AMX tiles take a standard
// copy of the panels they run: expand_panel64_dot, cpu/quant_pack.h).
inline bool compact_dot_weight(const Weight& w) { return w.quant.bits == 6 || w.quant.scale_dtype == DType::I8; }

// Calls kernel(std::integral_constant<int, bits>, std::bool_constant<affine>,
// std::integral_constant<DType, scale dtype>) for a standard (not compact) Panel64Dot weight: each
// ISA file instantiates its kernel per weight kind this way.
template <class Kernel>
void with_int8_weight_kind(const Weight& w, Kernel&& kernel) {
  if (w.layout != WeightLayout::Panel64Dot || compact_dot_weight(w)) std::abort();
  const auto by_scale = [&](auto bits, auto affine) {
    switch (w.quant.scale_dtype) {
      case DType::F32: return kernel(bits, affine, std::integral_constant<DType, DType::F32>{});
      case DType::F16: return kernel(bits, affine, std::integral_constant<DType, DType::F16>{});
      case DType::BF16: return kernel(bits, affine, std::integral_constant<DType, DType::BF16>{});
      default: std::abort();
    }
  };
  const bool affine = w.format == WeightFormat::Affine;
  if (w.quant.bits == 8)
    return affine ? by_scale(std::integral_constant<int, 8>{}, std::true_type{})
                  : by_scale(std::integral_constant<int, 8>{}, std::false_type{});
  return affine ? by_scale(std::integral_constant<int, 4>{}, std::true_type{})
                : by_scale(std::integral_constant<int, 4>{}, std::false_type{});
}

// As with_int8_weight_kind, for any Panel64Dot weight, compact forms included (bits 4, 6 or 8;
// scale dtype F32, F16, BF16 or I8 = factored): the portable-order kernels (AVX2, AVX-512 VNNI).
template <class Kernel>
void with_any_int8_weight_kind(const Weight& w, Kernel&& kernel) {
  if (w.layout != WeightLayout::Panel64Dot) std::abort();
  const auto by_scale = [&](auto bits, auto affine) {
    switch (w.quant.scale_dtype) {
      case DType::F32: return kernel(bits, affine, std::integral_constant<DType, DType::F32>{});
      case DType::F16: return kernel(bits, affine, std::integral_constant<DType, DType::F16>{});
      case DType::BF16: return kernel(bits, affine, std::integral_constant<DType, DType::BF16>{});
      case DType::I8: return kernel(bits, affine, std::integral_constant<DType, DType::I8>{});
      default: std::abort();
    }
  };
  const auto by_format = [&](auto bits) {
    return w.format == WeightFormat::Affine ? by_scale(bits, std::true_type{}) : by_scale(bits, std::false_type{});
  };
  switch (w.quant.bits) {
    case 4: return by_format(std::integral_constant<int, 4>{});
    case 6: return by_format(std::integral_constant<int, 6>{});
    case 8: return by_format(std::integral_constant<int, 8>{});
    default: std::abort();
  }
}

// out[m, n] for the rows of `a`, n in [n_begin, n_end) (n_begin a multiple of 64), `ldo` out's row
// stride. The weight is Panel64Dot and a.block is int8_activation_block(w).
using MatmulInt8Fn = void (*)(const Int8Rows& a, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                              int64_t ldo);
void matmul_int8_portable(const Int8Rows& a, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                          int64_t ldo);
#if defined(__x86_64__)
void matmul_int8_avx2(const Int8Rows& a, const Weight& w, int64_t n_begin, int64_t n_end, float* out, int64_t ldo);
// AVX-512 with VNNI (vpdpbusd).
void matmul_int8_avx512(const Int8Rows& a, const Weight& w, int64_t n_begin, int64_t n_end, float* out, int64_t ldo);
constexpr int64_t kAmxTileRows = 16;  // rows per AMX tile: fewer run the VNNI kernel
// AMX-INT8 tiles for each 16 rows, the rest through matmul_int8_avx512. Only after amx_int8_enabled().
// Standard Panel64Dot weights only (compact ones: expand_panel64_dot first, cpu/quant_pack.h).
void matmul_int8_amx(const Int8Rows& a, const Weight& w, int64_t n_begin, int64_t n_end, float* out, int64_t ldo);
// The CPU has AMX-INT8 and the kernel granted this process the tile state (arch_prctl
// ARCH_REQ_XCOMP_PERM, asked once).
bool amx_int8_enabled();
// Rows that went through AMX tiles in this process (tests check that the path engaged).
int64_t amx_int8_rows_run();
#endif

// The best kernel for this CPU (TACHYON_ISA=avx512|avx2|portable forces a fallback; avx512: no AMX).
MatmulInt8Fn matmul_int8_kernel();
const char* matmul_int8_kernel_name();

}  // namespace tachyon::kernels::cpu
