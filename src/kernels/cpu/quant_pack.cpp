#include "kernels/cpu/quant_pack.h"

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

QuantPanelBytes quant_panel64_dot_bytes(const Weight& w) { return quant_panel64_bytes(as_symmetric(w)); }

Weight pack_quant_panel64_dot(const Weight& row_major, void* codes, void* scales, void* biases) {
  const Weight w = as_symmetric(row_major);
  // Panel64 first for the scales (same places), then the codes in their dot-product order.
  Weight packed = pack_quant_panel64(w, codes, scales, biases);
  packed.layout = WeightLayout::Panel64Dot;
  const QuantPanelBytes sizes = quant_panel64_bytes(w);
  std::memset(codes, 0, sizes.codes);
  auto* out = static_cast<uint8_t*>(codes);
  const uint32_t z0 = static_cast<uint32_t>(dot_code_offset(w));  // u = q + z0: flips the sign bit
  for (int64_t r = 0; r < w.rows; ++r) {
    const int64_t j = r % Weight::kPanel, base = (r / Weight::kPanel) * w.cols;
    for (int64_t c = 0; c < w.cols; ++c) {
      const uint32_t u = code_at(w, r, c) ^ z0;
      if (w.quant.bits == 8) {
        out[(base + c - c % 4) * Weight::kPanel + 4 * j + c % 4] = static_cast<uint8_t>(u);
      } else {
        out[(base + c - c % 8) * (Weight::kPanel / 2) + 4 * j + c % 4] |= static_cast<uint8_t>(c % 8 < 4 ? u : u << 4);
      }
    }
  }
  return packed;
}

}  // namespace tachyon::kernels::cpu
