// Row-wise scalar ops shared by the reference backend (serial) and the CPU backend (rows in
// parallel). They are elementwise or reduce within one row in a fixed order, so both
// backends produce identical bits; the ops with real reduction choices (matmul, attention)
// have independent implementations that are tested against each other.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/kv_quant.h"
#include "kernels/ops.h"
#include "kernels/weight_dequant.h"

namespace tachyon::kernels::rowwise {

inline float load_element(const Weight& w, int64_t index) {
  switch (w.dtype) {
    case DType::F32: return static_cast<const float*>(w.data)[index];
    case DType::BF16: return tachyon::bf16_to_f32(static_cast<const uint16_t*>(w.data)[index]);
    case DType::F16: return tachyon::f16_to_f32(static_cast<const uint16_t*>(w.data)[index]);
    case DType::I8: return static_cast<float>(static_cast<const int8_t*>(w.data)[index]);
    default: return NAN;
  }
}
// Element (r, c) of a matrix, or element c of a 1-D weight (r = 0), whatever the layout.
inline float load_weight(const Weight& w, int64_t r, int64_t c) {
  if (w.quantized()) return dequantize_element(w, r, c);
  const float v = load_element(w, w.index_of(r, c));
  return w.scales ? v * w.scales[r] : v;
}
inline float load_weight(const Weight& w, int64_t c) { return load_weight(w, 0, c); }

// load_weight(table, id, i) · scale for every i. In the row-major and Panel64 layouts a dense
// row's elements are evenly strided (1 and the panel width): one index computation per row.
// A quantized table (tied embeddings) dequantizes each element (weight_dequant.h).
inline void embedding_row(const Weight& table, int32_t id, float scale, float* out) {
  if (table.layout == WeightLayout::MmaFragments || table.quantized()) {
    for (int64_t i = 0; i < table.cols; ++i) out[i] = load_weight(table, id, i) * scale;
    return;
  }
  const int64_t first = table.index_of(id, 0), step = table.layout == WeightLayout::Panel64 ? Weight::kPanel : 1;
  const float row_scale = table.scales ? table.scales[id] : 1.f;
  for (int64_t i = 0; i < table.cols; ++i) {
    const float v = load_element(table, first + i * step);
    out[i] = (table.scales ? v * row_scale : v) * scale;
  }
}

inline void rms_norm_row(const float* x, const Weight& w, int64_t dim, float eps, float weight_offset, float* out) {
  float sum = 0.f;
  for (int64_t i = 0; i < dim; ++i) sum += x[i] * x[i];
  const float inv = 1.f / std::sqrt(sum / static_cast<float>(dim) + eps);
  for (int64_t i = 0; i < dim; ++i) out[i] = (weight_offset + load_weight(w, i)) * (x[i] * inv);
}

inline void rope_row(float* x, int64_t heads, int64_t head_dim, const RopeTable& table, int32_t position) {
  const int64_t half = table.rotary_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float freq = static_cast<float>(position) * table.inv_freq[i];
    const float c = std::cos(freq) * table.attention_scaling, s = std::sin(freq) * table.attention_scaling;
    for (int64_t h = 0; h < heads; ++h) {
      float* xh = x + h * head_dim + table.offset;
      const int64_t a = table.interleaved ? 2 * i : i, b = table.interleaved ? 2 * i + 1 : i + half;
      const float x1 = xh[a], x2 = xh[b];
      xh[a] = x1 * c + (-x2) * s;
      xh[b] = x2 * c + x1 * s;
    }
  }
}

inline float silu(float x) { return x / (1.f + std::exp(-x)); }
inline float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.f + std::tanh(k * (x + 0.044715f * x * x * x)));
}

inline void gated_activation_row(const float* gate_up, int64_t dim, Activation act, float* out) {
  for (int64_t i = 0; i < dim; ++i) {
    const float g = gate_up[i];
    out[i] = (act == Activation::SiLU ? silu(g) : gelu_tanh(g)) * gate_up[dim + i];
  }
}

// Slot of the key at logical `position` as seen from `row` (tree rows map their branch).
inline int64_t kv_slot(const PagedKv& kv, const AttentionMeta& meta, int64_t row, int32_t position) {
  const int32_t* table = meta.block_tables + meta.block_table_offsets[meta.row_seq[row]];
  const int32_t p = kv_position(meta, row, position);
  return static_cast<int64_t>(table[p / kv.block_size]) * kv.block_size + p % kv.block_size;
}

// Encodes one head vector into its record of a K or V tensor (kernels/kv_quant.h).
inline void write_kv_head(const float* x, const KvTensorLayout& t, void* base, int64_t slot, int64_t head, int64_t d) {
  auto* b = static_cast<uint8_t*>(base);
  kv_quantize(t.codec, x, d, b + t.code_offset(slot, head), t.param_bytes ? b + t.param_offset(slot, head) : nullptr);
}

// The values attention reads for (slot, head) of a K or V tensor: a pointer into the cache for
// f32, else the record decoded into `scratch` [d].
inline const float* read_kv_head(const KvTensorLayout& t, const void* base, int64_t slot, int64_t head, int64_t d,
                                 float* scratch) {
  const auto* b = static_cast<const uint8_t*>(base);
  if (t.codec == KvCodec::F32) return reinterpret_cast<const float*>(b + t.code_offset(slot, head));
  kv_dequantize(t.codec, b + t.code_offset(slot, head), t.param_bytes ? b + t.param_offset(slot, head) : nullptr, d, scratch);
  return scratch;
}

inline void write_kv_row(const float* k, const float* v, const PagedKv& kv, const AttentionMeta& meta, int64_t row) {
  const int64_t d = kv.head_dim, width = kv.num_kv_heads * d;
  const int64_t slot = kv_slot(kv, meta, row, meta.positions[row]);
  const KvTensorLayout kl = kv.k_layout(), vl = kv.v_layout();
  for (int64_t h = 0; h < kv.num_kv_heads; ++h) {
    write_kv_head(k + row * width + h * d, kl, kv.k, slot, h, d);
    write_kv_head(v + row * width + h * d, vl, kv.v, slot, h, d);
  }
}

}  // namespace tachyon::kernels::rowwise
