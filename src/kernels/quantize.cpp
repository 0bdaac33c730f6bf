#include "kernels/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"

namespace tachyon::kernels {

namespace {

constexpr int64_t kInt4Group = 64;
constexpr int64_t kFp8Block = 128;

float element(const Weight& w, int64_t i) {
  switch (w.dtype) {
    case DType::F32: return static_cast<const float*>(w.data)[i];
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(w.data)[i]);
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(w.data)[i]);
    default: return NAN;
  }
}

void put_f32(std::vector<uint8_t>& out, size_t i, float v) { std::memcpy(out.data() + 4 * i, &v, 4); }
void put_f16(std::vector<uint8_t>& out, size_t i, uint16_t v) { std::memcpy(out.data() + 2 * i, &v, 2); }

QuantizedWeight int8_rows(const Weight& w) {
  QuantizedWeight q;
  q.codes.resize(static_cast<size_t>(w.rows * w.cols));
  q.scales.resize(static_cast<size_t>(w.rows) * 4);
  for (int64_t r = 0; r < w.rows; ++r) {
    float amax = 0.f;
    for (int64_t c = 0; c < w.cols; ++c) amax = std::max(amax, std::fabs(element(w, r * w.cols + c)));
    const float s = amax > 0.f ? amax / 127.f : 1.f;
    put_f32(q.scales, static_cast<size_t>(r), s);
    for (int64_t c = 0; c < w.cols; ++c) {
      const float v = std::clamp(std::round(element(w, r * w.cols + c) / s), -127.f, 127.f);
      q.codes[static_cast<size_t>(r * w.cols + c)] = static_cast<uint8_t>(static_cast<int8_t>(v));
    }
  }
  q.weight = Weight{q.codes.data(), DType::I8, w.rows, w.cols};
  q.weight.scales = reinterpret_cast<const float*>(q.scales.data());
  return q;
}

QuantizedWeight int4_groups(const Weight& w) {
  QuantizedWeight q;
  const int64_t groups = w.cols / kInt4Group;
  q.codes.assign(static_cast<size_t>((w.rows * w.cols + 1) / 2), 0);
  q.scales.resize(static_cast<size_t>(w.rows * groups) * 2);
  q.biases.resize(q.scales.size());
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t first = r * w.cols + g * kInt4Group;
      float lo = INFINITY, hi = -INFINITY;
      for (int64_t i = 0; i < kInt4Group; ++i) {
        lo = std::min(lo, element(w, first + i));
        hi = std::max(hi, element(w, first + i));
      }
      // The stored (f16) scale and bias are what the codes are computed against.
      const uint16_t s16 = f32_to_f16(hi > lo ? (hi - lo) / 15.f : 1.f), b16 = f32_to_f16(lo);
      const float s = f16_to_f32(s16) > 0.f ? f16_to_f32(s16) : 1.f, b = f16_to_f32(b16);
      put_f16(q.scales, static_cast<size_t>(r * groups + g), f32_to_f16(s));
      put_f16(q.biases, static_cast<size_t>(r * groups + g), b16);
      for (int64_t i = 0; i < kInt4Group; ++i) {
        const auto code = static_cast<uint8_t>(std::clamp(std::round((element(w, first + i) - b) / s), 0.f, 15.f));
        const int64_t at = first + i;
        q.codes[static_cast<size_t>(at / 2)] |= static_cast<uint8_t>(code << (at % 2 ? 4 : 0));
      }
    }
  q.weight = Weight{q.codes.data(), DType::U8, w.rows, w.cols};
  q.weight.format = WeightFormat::Affine;
  q.weight.quant = {4, static_cast<int32_t>(kInt4Group), DType::F16, q.scales.data(), q.biases.data()};
  return q;
}

QuantizedWeight fp8_blocks(const Weight& w) {
  QuantizedWeight q;
  const int64_t br = (w.rows + kFp8Block - 1) / kFp8Block, bc = (w.cols + kFp8Block - 1) / kFp8Block;
  q.codes.resize(static_cast<size_t>(w.rows * w.cols));
  q.scales.resize(static_cast<size_t>(br * bc) * 4);
  for (int64_t i = 0; i < br; ++i)
    for (int64_t j = 0; j < bc; ++j) {
      const int64_t r1 = std::min(w.rows, (i + 1) * kFp8Block), c1 = std::min(w.cols, (j + 1) * kFp8Block);
      float amax = 0.f;
      for (int64_t r = i * kFp8Block; r < r1; ++r)
        for (int64_t c = j * kFp8Block; c < c1; ++c) amax = std::max(amax, std::fabs(element(w, r * w.cols + c)));
      const float s = amax > 0.f ? amax / 448.f : 1.f;
      put_f32(q.scales, static_cast<size_t>(i * bc + j), s);
      for (int64_t r = i * kFp8Block; r < r1; ++r)
        for (int64_t c = j * kFp8Block; c < c1; ++c)
          q.codes[static_cast<size_t>(r * w.cols + c)] = f32_to_fp8_e4m3(element(w, r * w.cols + c) / s);
    }
  q.weight = Weight{q.codes.data(), DType::U8, w.rows, w.cols};
  q.weight.format = WeightFormat::Fp8Block;
  q.weight.quant = {8, static_cast<int32_t>(kFp8Block), DType::F32, q.scales.data(), nullptr};
  return q;
}

}  // namespace

std::optional<QuantizeMode> parse_quantize_mode(std::string_view name) {
  if (name.empty() || name == "none") return QuantizeMode::None;
  if (name == "int8") return QuantizeMode::Int8;
  if (name == "int4") return QuantizeMode::Int4;
  if (name == "fp8") return QuantizeMode::Fp8;
  return std::nullopt;
}

std::string_view quantize_mode_name(QuantizeMode mode) {
  switch (mode) {
    case QuantizeMode::None: return "none";
    case QuantizeMode::Int8: return "int8";
    case QuantizeMode::Int4: return "int4";
    case QuantizeMode::Fp8: return "fp8";
  }
  return "?";
}

bool can_quantize(const Weight& w, QuantizeMode mode) {
  const bool dense_float = !w.quantized() && w.layout == WeightLayout::RowMajor && w.scales == nullptr &&
                           (w.dtype == DType::F32 || w.dtype == DType::BF16 || w.dtype == DType::F16);
  if (mode == QuantizeMode::None || !dense_float || w.rows <= 1) return false;
  return mode != QuantizeMode::Int4 || w.cols % kInt4Group == 0;
}

QuantizedWeight quantize_weight(const Weight& w, QuantizeMode mode) {
  TACHYON_CHECK(can_quantize(w, mode), "cannot quantize a {} x {} weight of dtype {} to {}", w.rows, w.cols,
                dtype_name(w.dtype), quantize_mode_name(mode));
  switch (mode) {
    case QuantizeMode::Int8: return int8_rows(w);
    case QuantizeMode::Int4: return int4_groups(w);
    case QuantizeMode::Fp8: return fp8_blocks(w);
    case QuantizeMode::None: break;
  }
  return {};
}

}  // namespace tachyon::kernels
