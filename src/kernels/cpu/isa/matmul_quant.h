// Quantized Panel64 matmul kernels (formats: kernels/weight.h; packing: cpu/quant_pack.h).
// Each weight element is the f32 value of its scalar definition (kernels/weight_dequant.h),
// computed exactly in registers, then the dense kernels' sequential fma chain over k runs on
// it (cpu/dot.h): every ISA, tile height and batch size gives the bits of the portable path.
// Decode and verify rows dequantize each k step in registers (tiles of up to 6 rows); many rows
// (prefill) dequantize a panel once into a thread-local f32 panel and run the dense f32 tiles
// over it.
#pragma once

#include <type_traits>

#include "kernels/cpu/isa/matmul.h"
#include "kernels/weight_dequant.h"

namespace tachyon::kernels::cpu {

// What a code decodes to before its scale: unsigned (Affine) or two's complement (Symmetric)
// integers, e2m1 (Mxfp4) or e4m3fn (Fp8Block).
enum class Codes { U4, S4, E2M1, U8, S8, E4M3 };
constexpr bool four_bit(Codes c) { return c == Codes::U4 || c == Codes::S4 || c == Codes::E2M1; }
constexpr bool has_bias(Codes c) { return c == Codes::U4 || c == Codes::U8; }

// Calls fn(integral_constant<Codes, C>, integral_constant<DType, S>) for a quantized weight's
// codes and scale dtype; aborts on a combination kernels do not run (check_quantized_weight
// refuses those at upload).
template <class Fn>
void with_quant_kind(const Weight& w, Fn&& fn) {
  auto scaled = [&](auto codes) {
    switch (w.quant.scale_dtype) {
      case DType::F32: return fn(codes, std::integral_constant<DType, DType::F32>{});
      case DType::F16: return fn(codes, std::integral_constant<DType, DType::F16>{});
      case DType::BF16: return fn(codes, std::integral_constant<DType, DType::BF16>{});
      default: std::abort();
    }
  };
  const bool eight = w.quant.bits == 8;
  switch (w.format) {
    case WeightFormat::Affine:
      return eight ? scaled(std::integral_constant<Codes, Codes::U8>{}) : scaled(std::integral_constant<Codes, Codes::U4>{});
    case WeightFormat::Symmetric:
      return eight ? scaled(std::integral_constant<Codes, Codes::S8>{}) : scaled(std::integral_constant<Codes, Codes::S4>{});
    case WeightFormat::Fp8Block:
      return fn(std::integral_constant<Codes, Codes::E4M3>{}, std::integral_constant<DType, DType::F32>{});
    case WeightFormat::Mxfp4:
      return fn(std::integral_constant<Codes, Codes::E2M1>{}, std::integral_constant<DType, DType::U8>{});
    case WeightFormat::Dense: break;
  }
  std::abort();
}

// Where the panel holding output n0 (a multiple of 64) keeps its codes and scales (cpu/quant_pack.h).
// Internal linkage, as in cpu/dot.h: each ISA file compiles it with its own flags.
namespace {
struct PanelRef {
  const uint8_t* codes;  // the panel's first k step
  const void* scales;
  const void* biases;
  int64_t scale_index;   // the panel's first (group 0) entry
  int64_t k, group, step_bytes;
};
inline PanelRef panel_ref(const Weight& w, int64_t n0) {
  const int64_t group = quant_group(w), panel = n0 / Weight::kPanel, step = Weight::kPanel * w.quant.bits / 8;
  const int64_t groups = (w.cols + group - 1) / group;
  return PanelRef{static_cast<const uint8_t*>(w.data) + panel * w.cols * step, w.quant.scales, w.quant.biases,
                  panel * groups * Weight::kPanel, w.cols, group, step};
}
}  // namespace

// The f32 value of every 4-bit code (before its scale), as the scalar definition computes it.
template <Codes C>
constexpr float four_bit_value(int code) {
  if constexpr (C == Codes::U4) return static_cast<float>(code);
  if constexpr (C == Codes::S4) return static_cast<float>((code ^ 8) - 8);
  constexpr float kE2m1[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  return (code & 8) ? -kE2m1[code & 7] : kE2m1[code & 7];
}

constexpr int kMaxQuantTileRows = 6;  // AVX-512 register tiles (AVX2: 3)
// Up to this many rows run the register tiles (each tile decodes the panel again); more rows
// dequantize the panel once into f32 (writing and re-reading 4 bytes per weight, which pays
// only past a few tiles: measured on Sapphire Rapids, one 1024 x 1024 int4 matrix, 7 rows
// 249 µs through the f32 panel vs 136 µs as tiles of 6 + 1).
constexpr int kQuantRegisterRowsAvx512 = 24;
constexpr int kQuantRegisterRowsAvx2 = 12;

}  // namespace tachyon::kernels::cpu
