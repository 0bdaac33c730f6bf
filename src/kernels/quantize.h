// Quantizing float weights at load (`--quantize int8|int4|fp8`): a dense row-major F32 / BF16 /
// F16 weight becomes one of kernels/weight.h's formats.
//   int8  Dense I8, one f32 scale per row: s = amax / 127, q = round(w / s) (symmetric)
//   int4  Affine 4-bit, groups of 64 columns, F16 scale and bias from the group's min / max:
//         s = (max − min) / 15, b = min, q = round((w − b) / s) clamped to [0, 15]
//   fp8   Fp8Block e4m3 with 128x128 blocks, f32 scale = amax / 448, q = e4m3(w / s)
// Rounding is to nearest (ties away from zero for the integer codes, to even for e4m3).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/weight.h"

namespace tachyon::kernels {

enum class QuantizeMode : uint8_t { None, Int8, Int4, Fp8 };

// "int8", "int4", "fp8" (or "none"/""); nothing for another name.
std::optional<QuantizeMode> parse_quantize_mode(std::string_view name);
std::string_view quantize_mode_name(QuantizeMode mode);

// A quantized weight with the storage its pointers refer to.
struct QuantizedWeight {
  Weight weight;
  std::vector<uint8_t> codes, scales, biases;
};

// Whether `w` can be quantized in `mode` (dense float, 2-D, columns a multiple of the group for
// int4); a weight that cannot stays as it is.
bool can_quantize(const Weight& w, QuantizeMode mode);
// `w` (row-major dense float) in `mode`. Throws tachyon::Error when !can_quantize.
QuantizedWeight quantize_weight(const Weight& w, QuantizeMode mode);

}  // namespace tachyon::kernels
