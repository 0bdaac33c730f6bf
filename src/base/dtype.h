// Element types of checkpoint tensors and of the engine's buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tachyon {

// U32 and F8_E4M3 appear only in quantized checkpoints (MLX packed codes, FP8 weights); the
// loaders repack them into kernels/weight.h's formats.
enum class DType : uint8_t { F32, F16, BF16, F64, I64, I32, I16, I8, U8, Bool, U32, F8_E4M3 };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);                        // safetensors spelling: "F32", "BF16", ...
std::optional<DType> dtype_from_name(std::string_view name);     // inverse of dtype_name

// Scalar conversions used by loaders and reference kernels (round-to-nearest-even).
inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN stays NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
// f rounded to the nearest bf16 value, as a float.
inline float round_to_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }
float f16_to_f32(uint16_t h);
// OCP FP8 E4M3 ("e4m3fn": no infinities, 0x7f/0xff are NaN), exactly.
float fp8_e4m3_to_f32(uint8_t v);
uint8_t f32_to_fp8_e4m3(float f);  // round-to-nearest-even, saturating at ±448
uint16_t f32_to_f16(float f);

}  // namespace tachyon
