#include "base/dtype.h"

#include <array>
#include <cmath>
#include <limits>
#include <cstring>

namespace tachyon {

namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};
constexpr std::array<DTypeInfo, 12> kDTypes{{{DType::F32, "F32", 4},
                                             {DType::F16, "F16", 2},
                                             {DType::BF16, "BF16", 2},
                                             {DType::F64, "F64", 8},
                                             {DType::I64, "I64", 8},
                                             {DType::I32, "I32", 4},
                                             {DType::I16, "I16", 2},
                                             {DType::I8, "I8", 1},
                                             {DType::U8, "U8", 1},
                                             {DType::Bool, "BOOL", 1},
                                             {DType::U32, "U32", 4},
                                             {DType::F8_E4M3, "F8_E4M3", 1}}};
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

namespace tachyon {

float fp8_e4m3_to_f32(uint8_t v) {
  const float sign = (v & 0x80u) ? -1.f : 1.f;
  const int exponent = (v >> 3) & 0xf, mantissa = v & 0x7;
  if (exponent == 15 && mantissa == 7) return std::numeric_limits<float>::quiet_NaN();
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m/8 · 2^-6
  return sign * std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);        // (1 + m/8) · 2^(e-7)
}

uint8_t f32_to_fp8_e4m3(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  if (std::isnan(f)) return sign | 0x7f;
  const float a = std::fabs(f);
  if (a >= 448.f) return sign | 0x7e;  // saturate (e4m3fn has no infinity)
  if (a < 0.015625f) {                 // below the smallest normal 2^-6: steps of 2^-9
    const float q = std::nearbyint(a * 512.f);  // round-to-nearest-even (default rounding mode)
    return sign | static_cast<uint8_t>(q);      // q == 8 is the smallest normal's code
  }
  int exponent = static_cast<int>((bits >> 23) & 0xffu) - 127;
  const uint32_t m = bits & 0x7fffffu;
  uint32_t keep = m >> 20;
  const uint32_t rest = m & 0xfffffu;
  if (rest > 0x80000u || (rest == 0x80000u && (keep & 1u))) ++keep;
  if (keep == 8) {
    keep = 0;
    ++exponent;
  }
  const uint32_t code = (static_cast<uint32_t>(exponent + 7) << 3) | keep;
  return sign | static_cast<uint8_t>(code > 0x7e ? 0x7e : code);
}

}  // namespace tachyon
