#include "kernels/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "kernels/reference/rowwise.h"

namespace tachyon::kernels {

namespace {
const char* format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::Dense: return "Dense";
    case WeightFormat::Affine: return "Affine";
    case WeightFormat::Symmetric: return "Symmetric";
    case WeightFormat::Fp8Block: return "Fp8Block";
    case WeightFormat::Mxfp4: return "Mxfp4";
  }
  return "?";
}

void check_float_source(const Weight& w, const char* what) {
  if (w.layout != WeightLayout::RowMajor || w.quantized() ||
      (w.dtype != DType::F32 && w.dtype != DType::BF16 && w.dtype != DType::F16))
    throw Error("{}: needs a row-major F32, BF16 or F16 weight, got {} {} [{}, {}]", what, format_name(w.format),
                dtype_name(w.dtype), w.rows, w.cols);
}

[[noreturn]] void not_finite(const char* what, const Weight& w, int64_t r, int64_t c) {
  throw Error("{}: weight [{}, {}] element ({}, {}) is not finite ({})", what, w.rows, w.cols, r, c,
              rowwise::load_weight(w, r, c));
}

void append_f16(std::vector<uint8_t>& bytes, float v) {
  const uint16_t h = f32_to_f16(v);
  bytes.push_back(static_cast<uint8_t>(h & 0xff));
  bytes.push_back(static_cast<uint8_t>(h >> 8));
}
}  // namespace

int64_t quant_code_bytes(const Weight& w) { return (w.rows * w.cols * w.quant.bits + 7) / 8; }

int64_t quant_scale_count(const Weight& w) {
  const int64_t group = w.format == WeightFormat::Mxfp4 ? 32 : w.quant.group;
  if (w.format == WeightFormat::Fp8Block) return ((w.rows + group - 1) / group) * ((w.cols + group - 1) / group);
  return w.rows * (w.cols / group);
}

void check_quantized_weight(const Weight& w) {
  const QuantParams& q = w.quant;
  const char* f = format_name(w.format);
  if (!w.quantized()) throw Error("weight [{}, {}] is not quantized", w.rows, w.cols);
  if (!w.data || !q.scales) throw Error("{} weight [{}, {}] has no codes or no scales", f, w.rows, w.cols);
  switch (w.format) {
    case WeightFormat::Affine:
    case WeightFormat::Symmetric:
      if (q.bits != 4 && q.bits != 8) throw Error("{} weight: {} bits (supported: 4, 8)", f, q.bits);
      if (q.scale_dtype != DType::F32 && q.scale_dtype != DType::F16 && q.scale_dtype != DType::BF16)
        throw Error("{} weight: scales in {} (supported: F32, F16, BF16)", f, dtype_name(q.scale_dtype));
      if (w.format == WeightFormat::Affine && !q.biases) throw Error("Affine weight [{}, {}] has no biases", w.rows, w.cols);
      if (q.group <= 0 || w.cols % q.group != 0)
        throw Error("{} weight: group {} does not divide its {} columns", f, q.group, w.cols);
      break;
    case WeightFormat::Fp8Block:
      if (q.bits != 8 || q.scale_dtype != DType::F32 || q.group <= 0)
        throw Error("Fp8Block weight: needs 8 bits, F32 scales and a block edge > 0 (got {} bits, {}, {})", q.bits,
                    dtype_name(q.scale_dtype), q.group);
      break;
    case WeightFormat::Mxfp4:
      if (q.bits != 4 || q.scale_dtype != DType::U8 || w.cols % 32 != 0)
        throw Error("Mxfp4 weight: needs 4 bits, U8 (e8m0) scales and columns a multiple of 32 (got {} bits, {}, {})",
                    q.bits, dtype_name(q.scale_dtype), w.cols);
      break;
    case WeightFormat::Dense: break;
  }
}

bool quantize_rows_i8(const Weight& w, int8_t* q, float* scales) {
  for (int64_t r = 0; r < w.rows; ++r) {
    float peak = 0.f;
    for (int64_t c = 0; c < w.cols; ++c) {
      const float v = rowwise::load_weight(w, r, c);
      if (!std::isfinite(v)) return false;
      peak = std::max(peak, std::fabs(v));
    }
    const float scale = peak / 127.f;
    scales[r] = scale;
    for (int64_t c = 0; c < w.cols; ++c)
      q[r * w.cols + c] = scale > 0.f ? static_cast<int8_t>(std::lrint(rowwise::load_weight(w, r, c) / scale)) : 0;
  }
  return true;
}

QuantizedWeight quantize_int8(const Weight& w) {
  check_float_source(w, "quantize int8");
  QuantizedWeight out;
  out.codes.resize(static_cast<size_t>(w.rows * w.cols));
  out.scales.resize(static_cast<size_t>(w.rows) * sizeof(float));
  auto* scales = reinterpret_cast<float*>(out.scales.data());
  if (!quantize_rows_i8(w, reinterpret_cast<int8_t*>(out.codes.data()), scales))
    for (int64_t r = 0; r < w.rows; ++r)
      for (int64_t c = 0; c < w.cols; ++c)
        if (!std::isfinite(rowwise::load_weight(w, r, c))) not_finite("quantize int8", w, r, c);
  out.weight = Weight{out.codes.data(), DType::I8, w.rows, w.cols};
  out.weight.scales = scales;
  return out;
}

QuantizedWeight quantize_int4(const Weight& w, int32_t group) {
  check_float_source(w, "quantize int4");
  if (group <= 0 || w.cols % group != 0)
    throw Error("quantize int4: group {} does not divide the {} columns of weight [{}, {}]", group, w.cols, w.rows, w.cols);
  QuantizedWeight out;
  out.codes.assign(static_cast<size_t>((w.rows * w.cols + 1) / 2), 0);
  const int64_t groups = w.cols / group;
  out.scales.reserve(static_cast<size_t>(w.rows * groups * 2));
  out.biases.reserve(out.scales.capacity());
  std::vector<float> v(static_cast<size_t>(group));
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      float lo = INFINITY, hi = -INFINITY;
      for (int64_t i = 0; i < group; ++i) {
        const int64_t c = g * group + i;
        v[i] = rowwise::load_weight(w, r, c);
        if (!std::isfinite(v[i])) not_finite("quantize int4", w, r, c);
        lo = std::min(lo, v[i]);
        hi = std::max(hi, v[i]);
      }
      // The codes are chosen against the f16-rounded scale and bias the kernels will use.
      const float scale = f16_to_f32(f32_to_f16((hi - lo) / 15.f)), bias = f16_to_f32(f32_to_f16(lo));
      if (!std::isfinite(scale) || !std::isfinite(bias))
        throw Error("quantize int4: weight [{}, {}] row {} group {} spans [{}, {}], outside the f16 range", w.rows,
                    w.cols, r, g, lo, hi);
      append_f16(out.scales, scale);
      append_f16(out.biases, bias);
      for (int64_t i = 0; i < group; ++i) {
        const long q = scale > 0.f ? std::clamp(std::lrint((v[i] - bias) / scale), 0L, 15L) : 0L;
        const int64_t at = r * w.cols + g * group + i;
        out.codes[at / 2] |= static_cast<uint8_t>(at % 2 == 0 ? q : q << 4);
      }
    }
  out.weight = Weight{out.codes.data(), DType::U8, w.rows, w.cols};
  out.weight.format = WeightFormat::Affine;
  out.weight.quant = QuantParams{4, group, DType::F16, out.scales.data(), out.biases.data()};
  return out;
}

QuantizedWeight quantize_int8_grouped(const Weight& w, int32_t group) {
  check_float_source(w, "quantize int8 (grouped)");
  if (group <= 0 || w.cols % group != 0)
    throw Error("quantize int8: group {} does not divide the {} columns of weight [{}, {}]", group, w.cols, w.rows, w.cols);
  QuantizedWeight out;
  out.codes.resize(static_cast<size_t>(w.rows * w.cols));
  const int64_t groups = w.cols / group;
  out.scales.reserve(static_cast<size_t>(w.rows * groups * 2));
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      float peak = 0.f;
      for (int64_t c = g * group; c < (g + 1) * group; ++c) {
        const float v = rowwise::load_weight(w, r, c);
        if (!std::isfinite(v)) not_finite("quantize int8", w, r, c);
        peak = std::max(peak, std::fabs(v));
      }
      // The codes are chosen against the f16-rounded scale the kernels will use.
      const float scale = f16_to_f32(f32_to_f16(peak / 127.f));
      if (!std::isfinite(scale))
        throw Error("quantize int8: weight [{}, {}] row {} group {} reaches {}, outside the f16 range", w.rows, w.cols,
                    r, g, peak);
      append_f16(out.scales, scale);
      for (int64_t c = g * group; c < (g + 1) * group; ++c) {
        const long q = scale > 0.f ? std::clamp(std::lrint(rowwise::load_weight(w, r, c) / scale), -127L, 127L) : 0L;
        out.codes[static_cast<size_t>(r * w.cols + c)] = static_cast<uint8_t>(static_cast<int8_t>(q));
      }
    }
  out.weight = Weight{out.codes.data(), DType::U8, w.rows, w.cols};
  out.weight.format = WeightFormat::Symmetric;
  out.weight.quant = QuantParams{8, group, DType::F16, out.scales.data(), nullptr};
  return out;
}

QuantizedWeight quantize_fp8(const Weight& w, int32_t block) {
  check_float_source(w, "quantize fp8");
  if (block <= 0) throw Error("quantize fp8: block edge {} must be positive", block);
  QuantizedWeight out;
  out.codes.resize(static_cast<size_t>(w.rows * w.cols));
  const int64_t block_rows = (w.rows + block - 1) / block, block_cols = (w.cols + block - 1) / block;
  out.scales.resize(static_cast<size_t>(block_rows * block_cols) * sizeof(float));
  auto* scales = reinterpret_cast<float*>(out.scales.data());
  for (int64_t br = 0; br < block_rows; ++br)
    for (int64_t bc = 0; bc < block_cols; ++bc) {
      const int64_t r0 = br * block, r1 = std::min<int64_t>(w.rows, r0 + block);
      const int64_t c0 = bc * block, c1 = std::min<int64_t>(w.cols, c0 + block);
      float peak = 0.f;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) {
          const float v = rowwise::load_weight(w, r, c);
          if (!std::isfinite(v)) not_finite("quantize fp8", w, r, c);
          peak = std::max(peak, std::fabs(v));
        }
      const float scale = peak / 448.f;
      scales[br * block_cols + bc] = scale;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c)
          out.codes[static_cast<size_t>(r * w.cols + c)] =
              scale > 0.f ? f32_to_fp8_e4m3(rowwise::load_weight(w, r, c) / scale) : uint8_t{0};
    }
  out.weight = Weight{out.codes.data(), DType::U8, w.rows, w.cols};
  out.weight.format = WeightFormat::Fp8Block;
  out.weight.quant = QuantParams{8, block, DType::F32, out.scales.data(), nullptr};
  return out;
}

namespace {
constexpr int32_t kWeightInt4Group = 64;
}  // namespace

std::optional<QuantizeMode> parse_quantize_mode(std::string_view name) {
  if (name.empty() || name == "none") return QuantizeMode::None;
  if (name == "int8") return QuantizeMode::Int8;
  if (name == "int4") return QuantizeMode::Int4;
  if (name == "fp8") return QuantizeMode::Fp8;
  return std::nullopt;
}

std::optional<Int8ActivationMode> parse_int8_activation_mode(std::string_view name) {
  if (name.empty() || name == "auto") return Int8ActivationMode::Auto;
  if (name == "on") return Int8ActivationMode::On;
  if (name == "off") return Int8ActivationMode::Off;
  return std::nullopt;
}

std::string_view int8_activation_mode_name(Int8ActivationMode mode) {
  switch (mode) {
    case Int8ActivationMode::Auto: return "auto";
    case Int8ActivationMode::On: return "on";
    case Int8ActivationMode::Off: return "off";
  }
  return "?";
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
  return mode != QuantizeMode::Int4 || w.cols % kWeightInt4Group == 0;
}

QuantizedWeight quantize_weight(const Weight& w, QuantizeMode mode) {
  TACHYON_CHECK(can_quantize(w, mode), "cannot quantize a {} x {} weight of dtype {} to {}", w.rows, w.cols,
                dtype_name(w.dtype), quantize_mode_name(mode));
  switch (mode) {
    case QuantizeMode::Int8: return quantize_int8(w);
    case QuantizeMode::Int4: return quantize_int4(w, kWeightInt4Group);
    case QuantizeMode::Fp8: return quantize_fp8(w, 128);
    case QuantizeMode::None: break;
  }
  return {};
}

}  // namespace tachyon::kernels
