#include "kernels/cpu/quant_pack.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/isa/matmul.h"
#include "kernels/cpu/isa/matmul_int8.h"
#include "kernels/weight_dequant.h"

namespace tachyon::kernels::cpu {

namespace {
int64_t panel_groups(const Weight& w) { return (w.cols + quant_group(w) - 1) / quant_group(w); }
}  // namespace

QuantPanelBytes quant_panel64_bytes(const Weight& w) {
  const int64_t padded = panel64_padded_rows(w.rows);
  const size_t entries = static_cast<size_t>(padded * panel_groups(w));
  QuantPanelBytes b;
  b.codes = static_cast<size_t>(padded * w.cols * w.quant.bits / 8);
  b.scales = entries * dtype_size(w.quant.scale_dtype);
  b.biases = w.format == WeightFormat::Affine ? b.scales : 0;
  return b;
}

Weight pack_quant_panel64(const Weight& w, void* codes, void* scales, void* biases) {
  const QuantPanelBytes sizes = quant_panel64_bytes(w);
  std::memset(codes, 0, sizes.codes);
  std::memset(scales, 0, sizes.scales);
  if (biases) std::memset(biases, 0, sizes.biases);
  Weight packed = w;
  packed.layout = WeightLayout::Panel64;
  packed.data = codes;
  packed.quant.scales = scales;
  packed.quant.biases = w.format == WeightFormat::Affine ? biases : nullptr;
  auto* out = static_cast<uint8_t*>(codes);
  const int64_t step_bytes = Weight::kPanel * w.quant.bits / 8;
  for (int64_t r = 0; r < w.rows; ++r) {
    const int64_t j = r % Weight::kPanel;
    uint8_t* panel = out + (r / Weight::kPanel) * w.cols * step_bytes;
    if (w.quant.bits == 8) {
      for (int64_t c = 0; c < w.cols; ++c) panel[c * step_bytes + j] = static_cast<uint8_t>(code_at(w, r, c));
    } else {
      const int shift = j < 32 ? 0 : 4;
      for (int64_t c = 0; c < w.cols; ++c) panel[c * step_bytes + j % 32] |= static_cast<uint8_t>(code_at(w, r, c) << shift);
    }
  }
  // Scales and biases: one entry per (row, group), copied as stored (Fp8Block: its block's).
  const size_t esize = dtype_size(w.quant.scale_dtype);
  const int64_t group = quant_group(w), groups = panel_groups(w);
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      const size_t from = static_cast<size_t>(scale_index(w, r, g * group)) * esize;
      const size_t to = static_cast<size_t>(scale_index(packed, r, g * group)) * esize;
      std::memcpy(static_cast<uint8_t*>(scales) + to, static_cast<const uint8_t*>(w.quant.scales) + from, esize);
      if (packed.quant.biases)
        std::memcpy(static_cast<uint8_t*>(biases) + to, static_cast<const uint8_t*>(w.quant.biases) + from, esize);
    }
  return packed;
}

namespace {
// A Dense I8 weight with row scales as the Symmetric 8-bit weight it is (one group per row).
Weight as_symmetric(const Weight& w) {
  if (w.format != WeightFormat::Dense) return w;
  Weight s = w;
  s.format = WeightFormat::Symmetric;
  s.dtype = DType::U8;
  s.quant = QuantParams{8, static_cast<int32_t>(w.cols), DType::F32, w.scales, nullptr};
  s.scales = nullptr;
  return s;
}
}  // namespace

namespace {

// Whether every code of an 8-bit weight fits the 6-bit form: Symmetric q in [−32, 31], Affine
// q < 64.
bool codes_fit_six_bits(const Weight& w) {
  if (w.quant.bits != 8) return false;
  const auto* codes = static_cast<const uint8_t*>(w.data);
  const int64_t n = w.rows * w.cols;
  const bool symmetric = w.format == WeightFormat::Symmetric;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t q = symmetric ? static_cast<int8_t>(codes[i]) + 32 : codes[i];
    if (q < 0 || q > 63) return false;
  }
  return true;
}

bool same_bits(float a, float b) {
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

// One factor f and int8 multipliers m[i] with f32(f · f32(m[i])) == v[i] bit for bit (signs of
// zero included), or false. A value of smallest magnitude is f times some ±t, t in [1, 128] (for
// a K-quant span, t = its smallest sub-scale gives ggml's f16 d), and the largest, f times at
// most 128, bounds t by 128·|smallest| / |largest|: those are the candidates, each checked on
// the largest value first (where a wrong one fails).
bool factor_span(const float* v, int n, float* factor, int8_t* multipliers) {
  int smallest = -1, largest = 0;
  for (int i = 0; i < n; ++i) {
    if (!std::isfinite(v[i])) return false;
    if (v[i] != 0.f && (smallest < 0 || std::fabs(v[i]) < std::fabs(v[smallest]))) smallest = i;
    if (std::fabs(v[i]) > std::fabs(v[largest])) largest = i;
  }
  float inverse = 0.f;  // of the candidate f: v·(1/f) rounds to the same integer as v/f here,
                       // and every multiplier is checked by the product anyway
  const auto multiplier = [&](int i, float f, int8_t* m) {
    const float x = v[i] * inverse;
    if (!(x >= -128.5f && x <= 127.5f)) return false;
    // Round to nearest even (|x| < 2^22) without a libm call; the stored integer (a zero has no
    // sign) times f is what the kernels compute.
    const auto k = static_cast<int8_t>(static_cast<int32_t>((x + 12582912.f) - 12582912.f));
    *m = k;
    return same_bits(f * static_cast<float>(k), v[i]);
  };
  const auto fits = [&](float f) {
    inverse = 1.f / f;
    int8_t m;
    if (!multiplier(largest, f, &m)) return false;
    for (int i = 0; i < n; ++i)
      if (!multiplier(i, f, &multipliers[i])) return false;
    *factor = f;
    return true;
  };
  if (smallest < 0) return fits(1.f) || fits(-1.f);  // all zeros: the factor's sign gives theirs
  const double ratio = static_cast<double>(v[largest]) / static_cast<double>(v[smallest]);
  const int t_max = static_cast<int>(std::min(128.0, std::floor(128.0 / std::fabs(ratio)) + 1.0));
  for (int t = 1; t <= t_max; ++t) {
    // The largest value is t·ratio times the factor: skip t where that is no integer (a
    // multiply, where the full check costs divisions).
    const double x = t * ratio, nearest = (x + 6755399441055744.0) - 6755399441055744.0;  // |x| <= 128.5
    if (std::fabs(x - nearest) > 1e-3) continue;
    if (fits(v[smallest] / static_cast<float>(t)) || fits(v[smallest] / static_cast<float>(-t))) return true;
  }
  return false;
}

// Factors every (row, 256 columns) span of F32 row-major scales [rows, cols / group] into
// multipliers (same places) and factors [rows, cols / 256]; false if one span does not factor.
bool factor_values(const Weight& w, const void* values, std::vector<int8_t>* multipliers, std::vector<float>* factors) {
  const int64_t groups = w.cols / w.quant.group, per_span = kFactorSpan / w.quant.group, spans = w.cols / kFactorSpan;
  const auto* v = static_cast<const float*>(values);
  if (multipliers) multipliers->resize(static_cast<size_t>(w.rows * groups));
  if (factors) factors->resize(static_cast<size_t>(w.rows * spans));
  int8_t scratch[kFactorSpan];
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t t = 0; t < spans; ++t) {
      const int64_t first = r * groups + t * per_span;
      float f;
      if (!factor_span(v + first, static_cast<int>(per_span), &f, multipliers ? multipliers->data() + first : scratch))
        return false;
      if (factors) (*factors)[static_cast<size_t>(r * spans + t)] = f;
    }
  return true;
}

bool factorable_layout(const Weight& w) {
  // At least 4 groups per span (a factor per 1 or 2 would save little or cost bytes).
  return w.quant.scale_dtype == DType::F32 && w.cols % kFactorSpan == 0 && kFactorSpan % w.quant.group == 0 &&
         w.quant.group <= kFactorSpan / 4;
}

QuantPanelBytes dot_bytes(const Weight& packed) {
  const int64_t padded = panel64_padded_rows(packed.rows);
  QuantPanelBytes b;
  b.codes = static_cast<size_t>(padded * packed.cols * packed.quant.bits / 8);
  if (packed.quant.scale_dtype == DType::I8)
    b.scales = static_cast<size_t>(factor_offset(packed) + padded * (packed.cols / kFactorSpan) * 4);
  else
    b.scales = static_cast<size_t>(padded * panel_groups(packed)) * dtype_size(packed.quant.scale_dtype);
  b.biases = packed.format == WeightFormat::Affine ? b.scales : 0;
  return b;
}

// Scales or biases into `dst` in the packed weight's form: as stored, or (factored) the plan's
// multipliers and factors.
void pack_dot_values(const Weight& host, const Weight& packed, const void* values, const std::vector<int8_t>& multipliers,
                     const std::vector<float>& factors, void* dst) {
  const int64_t group = host.quant.group, groups = host.cols / group;
  if (packed.quant.scale_dtype != DType::I8) {
    const size_t esize = dtype_size(host.quant.scale_dtype);
    for (int64_t r = 0; r < host.rows; ++r)
      for (int64_t g = 0; g < groups; ++g)
        std::memcpy(static_cast<uint8_t*>(dst) + static_cast<size_t>(scale_index(packed, r, g * group)) * esize,
                    static_cast<const uint8_t*>(values) + static_cast<size_t>(r * groups + g) * esize, esize);
    return;
  }
  auto* m = static_cast<int8_t*>(dst);
  auto* f = reinterpret_cast<float*>(static_cast<uint8_t*>(dst) + factor_offset(packed));
  const int64_t spans = host.cols / kFactorSpan;
  for (int64_t r = 0; r < host.rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) m[scale_index(packed, r, g * group)] = multipliers[static_cast<size_t>(r * groups + g)];
    for (int64_t t = 0; t < spans; ++t)
      f[((r / Weight::kPanel) * spans + t) * Weight::kPanel + r % Weight::kPanel] = factors[static_cast<size_t>(r * spans + t)];
  }
}

}  // namespace

PanelDotPlan plan_panel64_dot(const Weight& row_major) {
  PanelDotPlan plan;
  const Weight w = as_symmetric(row_major);
  plan.form = w;
  plan.form.layout = WeightLayout::Panel64Dot;
  if (codes_fit_six_bits(w)) plan.form.quant.bits = 6;
  if (factorable_layout(w) && factor_values(w, w.quant.scales, &plan.scale_multipliers, &plan.scale_factors) &&
      (w.format != WeightFormat::Affine || factor_values(w, w.quant.biases, &plan.bias_multipliers, &plan.bias_factors)))
    plan.form.quant.scale_dtype = DType::I8;
  plan.bytes = dot_bytes(plan.form);
  return plan;
}

QuantPanelBytes quant_panel64_dot_bytes(const Weight& w) { return plan_panel64_dot(w).bytes; }

Weight pack_quant_panel64_dot(const Weight& row_major, void* codes, void* scales, void* biases) {
  return pack_planned_panel64_dot(plan_panel64_dot(row_major), row_major, codes, scales, biases);
}

Weight pack_planned_panel64_dot(const PanelDotPlan& plan, const Weight& row_major, void* codes, void* scales,
                               void* biases) {
  const Weight w = as_symmetric(row_major);
  Weight packed = plan.form;
  const QuantPanelBytes& sizes = plan.bytes;
  packed.data = codes;
  packed.quant.scales = scales;
  packed.quant.biases = w.format == WeightFormat::Affine ? biases : nullptr;
  std::memset(codes, 0, sizes.codes);
  std::memset(scales, 0, sizes.scales);
  if (packed.quant.biases) std::memset(biases, 0, sizes.biases);
  pack_dot_values(w, packed, w.quant.scales, plan.scale_multipliers, plan.scale_factors, scales);
  if (packed.quant.biases) pack_dot_values(w, packed, w.quant.biases, plan.bias_multipliers, plan.bias_factors, biases);
  auto* out = static_cast<uint8_t*>(codes);
  const uint32_t z0 = static_cast<uint32_t>(dot_code_offset(w));  // u = q + z0: flips the sign bit
  for (int64_t r = 0; r < w.rows; ++r) {
    const int64_t j = r % Weight::kPanel, base = (r / Weight::kPanel) * w.cols;
    for (int64_t c = 0; c < w.cols; ++c) {
      const uint32_t code = code_at(w, r, c);
      if (packed.quant.bits == 6) {  // u = q + 32 (Symmetric) or q
        const uint32_t u = w.format == WeightFormat::Symmetric ? static_cast<uint32_t>(static_cast<int8_t>(code) + 32) : code;
        uint8_t* step = out + (base + c - c % 16) * 48;
        step[(c % 16 / 8) * 256 + 4 * j + c % 4] |= static_cast<uint8_t>(c % 8 < 4 ? (u & 15u) : (u & 15u) << 4);
        step[512 + 4 * j + c % 4] |= static_cast<uint8_t>((u >> 4) << (2 * (c % 16 / 4)));
      } else if (packed.quant.bits == 8) {
        out[(base + c - c % 4) * Weight::kPanel + 4 * j + c % 4] = static_cast<uint8_t>(code ^ z0);
      } else {
        const uint32_t u = code ^ z0;
        out[(base + c - c % 8) * (Weight::kPanel / 2) + 4 * j + c % 4] |= static_cast<uint8_t>(c % 8 < 4 ? u : u << 4);
      }
    }
  }
  return packed;
}

Weight expand_panel64_dot(const Weight& w, int64_t n_begin, int64_t n_end, StandardPanels& buffers) {
  const int64_t p0 = n_begin / Weight::kPanel, p1 = (n_end + Weight::kPanel - 1) / Weight::kPanel, k = w.cols;
  Weight view = w;
  view.rows = n_end - n_begin;
  view.quant.bits = w.quant.bits == 4 ? 4 : 8;
  view.quant.scale_dtype = w.quant.scale_dtype == DType::I8 ? DType::F32 : w.quant.scale_dtype;
  const int64_t panel_bytes = k * Weight::kPanel * view.quant.bits / 8;
  buffers.codes.resize(static_cast<size_t>((p1 - p0) * panel_bytes));
  const auto* src = static_cast<const uint8_t*>(w.data);
  if (w.quant.bits == 6) {
    const uint8_t offset = w.format == WeightFormat::Symmetric ? 128 - 32 : 0;  // u8 = q + 128, u6 = q + 32
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t k0 = 0; k0 < k; k0 += 16) {
        const uint8_t* step = src + (p * k + k0) * 48;
        uint8_t* dst = buffers.codes.data() + ((p - p0) * k + k0) * Weight::kPanel;
        for (int q = 0; q < 4; ++q)
          for (int i = 0; i < 256; ++i) {
            const uint32_t nibble = (step[(q / 2) * 256 + i] >> (4 * (q % 2))) & 15u, top = (step[512 + i] >> (2 * q)) & 3u;
            dst[q * 256 + i] = static_cast<uint8_t>((nibble | top << 4) + offset);
          }
      }
  } else {
    std::memcpy(buffers.codes.data(), src + p0 * panel_bytes, buffers.codes.size());
  }
  view.data = buffers.codes.data();
  const int64_t groups = panel_groups(w), entries = (p1 - p0) * groups * Weight::kPanel;
  const auto expand = [&](const void* values, std::vector<uint8_t>& dst) -> const void* {
    if (w.quant.scale_dtype != DType::I8) {
      const size_t esize = dtype_size(w.quant.scale_dtype);
      dst.resize(static_cast<size_t>(entries) * esize);
      std::memcpy(dst.data(), static_cast<const uint8_t*>(values) + static_cast<size_t>(p0 * groups * Weight::kPanel) * esize,
                  dst.size());
      return dst.data();
    }
    dst.resize(static_cast<size_t>(entries) * 4);
    auto* out = reinterpret_cast<float*>(dst.data());
    const auto* m = static_cast<const int8_t*>(values);
    const auto* factors = reinterpret_cast<const float*>(static_cast<const uint8_t*>(values) + factor_offset(w));
    const int64_t spans = k / kFactorSpan, per_span = kFactorSpan / w.quant.group;
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t at = (p * groups + g) * Weight::kPanel, from = (p * spans + g / per_span) * Weight::kPanel;
        float* o = out + ((p - p0) * groups + g) * Weight::kPanel;
        for (int64_t j = 0; j < Weight::kPanel; ++j) o[j] = factors[from + j] * static_cast<float>(m[at + j]);  // group_value's
      }
    return dst.data();
  };
  view.quant.scales = expand(w.quant.scales, buffers.scales);
  if (w.quant.biases) view.quant.biases = expand(w.quant.biases, buffers.biases);
  return view;
}

}  // namespace tachyon::kernels::cpu
