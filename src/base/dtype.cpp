#include "base/dtype.h"

#include <array>
#include <cstring>

namespace tachyon {

namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};
constexpr std::array<DTypeInfo, 10> kDTypes{{{DType::F32, "F32", 4},
                                             {DType::F16, "F16", 2},
                                             {DType::BF16, "BF16", 2},
                                             {DType::F64, "F64", 8},
                                             {DType::I64, "I64", 8},
                                             {DType::I32, "I32", 4},
                                             {DType::I16, "I16", 2},
                                             {DType::I8, "I8", 1},
                                             {DType::U8, "U8", 1},
                                             {DType::Bool, "BOOL", 1}}};
}  // namespace

size_t dtype_size(DType dtype) { return kDTypes[static_cast<size_t>(dtype)].size; }
std::string_view dtype_name(DType dtype) { return kDTypes[static_cast<size_t>(dtype)].name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& info : kDTypes)
    if (info.name == name) return info.dtype;
  return std::nullopt;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ffu, bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exponent = 127 - 15 + 1;
      while (!(mantissa & 0x400u)) {
        mantissa <<= 1;
        --exponent;
      }
      bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
    }
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // overflow to inf (also rounds 65520+)
  if (abs < 0x38800000u) {                         // subnormal or zero in f16
    if (abs < 0x33000000u) return sign;
    const uint32_t exponent = abs >> 23, mantissa = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // 14..24
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return sign | static_cast<uint16_t>(half);
  }
  uint32_t half = ((abs >> 13) - ((127 - 15) << 10));
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return sign | static_cast<uint16_t>(half);
}

}  // namespace tachyon
