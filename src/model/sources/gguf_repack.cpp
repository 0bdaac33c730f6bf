#include "model/sources/gguf_repack.h"

#include <cmath>
#include <cstring>

#include "base/error.h"
#include "kernels/weight_dequant.h"

namespace tachyon::model {

using io::GgmlType;
using kernels::WeightFormat;

namespace {

constexpr GgmlType kSupported[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                                   GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                   GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::MXFP4};

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// The output of one repack: codes (1 byte or a nibble per value), scales and biases, row-major.
class Packer {
 public:
  Packer(int64_t rows, int64_t cols, int bits, int32_t group, DType scale_dtype, bool affine, const std::string& name)
      : rows_(rows), cols_(cols), bits_(bits), group_(group), scale_dtype_(scale_dtype), name_(name) {
    codes_.assign(static_cast<size_t>(rows * cols * bits / 8), 0);
    const size_t groups = static_cast<size_t>(rows * (cols / group));
    scales_.assign(groups * dtype_size(scale_dtype), 0);
    if (affine) biases_.assign(scales_.size(), 0);
  }
  // Element i (= r·cols + c) gets code `code` (already in the format's encoding).
  void code(int64_t i, uint32_t code) {
    if (bits_ == 8) {
      codes_[static_cast<size_t>(i)] = static_cast<uint8_t>(code);
    } else {
      uint8_t& b = codes_[static_cast<size_t>(i / 2)];
      b = (i % 2 == 0) ? static_cast<uint8_t>((b & 0xf0u) | (code & 0xfu)) : static_cast<uint8_t>((b & 0x0fu) | (code << 4));
    }
  }
  void scale_f16(int64_t g, uint16_t bits, int64_t block) {
    check_finite(f16_to_f32(bits), block);
    std::memcpy(scales_.data() + g * 2, &bits, 2);
  }
  void bias_f16(int64_t g, uint16_t bits, int64_t block) {
    check_finite(f16_to_f32(bits), block);
    std::memcpy(biases_.data() + g * 2, &bits, 2);
  }
  void scale_f32(int64_t g, float v, int64_t block) {
    check_finite(v, block);
    std::memcpy(scales_.data() + g * 4, &v, 4);
  }
  void bias_f32(int64_t g, float v, int64_t block) {
    check_finite(v, block);
    std::memcpy(biases_.data() + g * 4, &v, 4);
  }
  HostTensor finish(WeightFormat format) {
    HostTensor out;
    out.owned.reserve(3);
    out.owned.push_back(std::move(codes_));
    out.weight.data = out.owned.back().data();
    out.weight.dtype = DType::U8;
    out.weight.rows = rows_;
    out.weight.cols = cols_;
    out.weight.format = format;
    out.weight.quant.bits = static_cast<uint8_t>(bits_);
    out.weight.quant.group = group_;
    out.weight.quant.scale_dtype = scale_dtype_;
    out.owned.push_back(std::move(scales_));
    out.weight.quant.scales = out.owned.back().data();
    if (!biases_.empty()) {
      out.owned.push_back(std::move(biases_));
      out.weight.quant.biases = out.owned.back().data();
    }
    return out;
  }

 private:
  int64_t rows_, cols_;
  int bits_;
  int32_t group_;
  DType scale_dtype_;
  const std::string& name_;
  std::vector<uint8_t> codes_, scales_, biases_;

  void check_finite(float v, int64_t block) const {
    if (!std::isfinite(v)) throw Error("tensor '{}': block {} has a non-finite scale ({})", name_, block, v);
  }
};

// Walks the blocks of `rows` x `cols` values: fn(block pointer, block index, index of its first
// element). Blocks run along a row; rows follow each other.
template <typename Fn>
void for_each_block(const uint8_t* data, int64_t rows, int64_t cols, int64_t block_elements, int64_t block_bytes,
                    Fn&& fn) {
  const int64_t blocks = rows * cols / block_elements;
  for (int64_t b = 0; b < blocks; ++b) fn(data + b * block_bytes, b, b * block_elements);
}

// K-quants' 6-bit scale and min of sub-block j (ggml-common.h's 12-byte `scales` packing).
void k_scale_min(int j, const uint8_t* s, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

HostTensor repack_q8_0(const uint8_t* data, int64_t rows, int64_t cols, const std::string& name) {
  Packer p(rows, cols, 8, 32, DType::F16, false, name);
  for_each_block(data, rows, cols, 32, 34, [&](const uint8_t* blk, int64_t b, int64_t first) {
    p.scale_f16(b, load_u16(blk), b);
    for (int j = 0; j < 32; ++j) p.code(first + j, blk[2 + j]);  // int8 two's complement = the Symmetric code
  });
  return p.finish(WeightFormat::Symmetric);
}

HostTensor repack_q4_0(const uint8_t* data, int64_t rows, int64_t cols, const std::string& name) {
  Packer p(rows, cols, 4, 32, DType::F16, false, name);
  for_each_block(data, rows, cols, 32, 18, [&](const uint8_t* blk, int64_t b, int64_t first) {
    p.scale_f16(b, load_u16(blk), b);
    const uint8_t* qs = blk + 2;
    for (int j = 0; j < 16; ++j) {  // q − 8 as a 4-bit two's complement code is q ^ 8
      p.code(first + j, (qs[j] & 0xfu) ^ 8u);
      p.code(first + j + 16, (qs[j] >> 4) ^ 8u);
    }
  });
  return p.finish(WeightFormat::Symmetric);
}

HostTensor repack_q4_1(const uint8_t* data, int64_t rows, int64_t cols, const std::string& name) {
  Packer p(rows, cols, 4, 32, DType::F16, true, name);
  for_each_block(data, rows, cols, 32, 20, [&](const uint8_t* blk, int64_t b, int64_t first) {
    p.scale_f16(b, load_u16(blk), b);
    p.bias_f16(b, load_u16(blk + 2), b);
    const uint8_t* qs = blk + 4;
    for (int j = 0; j < 16; ++j) {
      p.code(first + j, qs[j] & 0xfu);
      p.code(first + j + 16, qs[j] >> 4);
    }
  });
  return p.finish(WeightFormat::Affine);
}

// Q5_0 / Q5_1: value j's fifth bit is bit j of the little-endian u32 qh.
template <bool kAffine>
HostTensor repack_q5(const uint8_t* data, int64_t rows, int64_t cols, const std::string& name) {
  constexpr int64_t kBytes = kAffine ? 24 : 22, kHead = kAffine ? 4 : 2;
  Packer p(rows, cols, 8, 32, DType::F16, kAffine, name);
  for_each_block(data, rows, cols, 32, kBytes, [&](const uint8_t* blk, int64_t b, int64_t first) {
    p.scale_f16(b, load_u16(blk), b);
    if (kAffine) p.bias_f16(b, load_u16(blk + 2), b);
    uint32_t qh;
    std::memcpy(&qh, blk + kHead, 4);
    const uint8_t* qs = blk + kHead + 4;
    for (int j = 0; j < 16; ++j) {
      const uint32_t lo = (qs[j] & 0xfu) | (((qh >> j) & 1u) << 4);
      const uint32_t hi = (qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4);
      // Symmetric: q − 16 as an int8 code; Affine: q itself.
      p.code(first + j, kAffine ? lo : static_cast<uint8_t>(static_cast<int8_t>(static_cast<int32_t>(lo) - 16)));
      p.code(first + j + 16, kAffine ? hi : static_cast<uint8_t>(static_cast<int8_t>(static_cast<int32_t>(hi) - 16)));
    }
  });
  return p.finish(kAffine ? WeightFormat::Affine : WeightFormat::Symmetric);
}

// Q4_K / Q5_K: 256 values in 8 sub-blocks of 32, each with scale d·sc and minimum dmin·m; the
// nibbles of 32 bytes hold sub-blocks 2i (low) and 2i+1 (high); Q5_K's qh[32] byte l holds the
// fifth bit of value l of sub-block k in bit k.
template <bool kFiveBit>
HostTensor repack_k_affine(const uint8_t* data, int64_t rows, int64_t cols, const std::string& name) {
  constexpr int64_t kBytes = kFiveBit ? 176 : 144;
  Packer p(rows, cols, kFiveBit ? 8 : 4, 32, DType::F32, true, name);
  for_each_block(data, rows, cols, 256, kBytes, [&](const uint8_t* blk, int64_t b, int64_t first) {
    const float d = f16_to_f32(load_u16(blk)), dmin = f16_to_f32(load_u16(blk + 2));
    const uint8_t* scales = blk + 4;
    const uint8_t* qh = blk + 16;
    const uint8_t* qs = blk + 16 + (kFiveBit ? 32 : 0);
    for (int sub = 0; sub < 8; ++sub) {
      uint8_t sc, m;
      k_scale_min(sub, scales, &sc, &m);
      const int64_t g = first / 32 + sub;
      p.scale_f32(g, d * static_cast<float>(sc), b);
      p.bias_f32(g, -(dmin * static_cast<float>(m)), b);
      const uint8_t* q = qs + (sub / 2) * 32;
      for (int l = 0; l < 32; ++l) {
        uint32_t v = (sub % 2 == 0) ? (q[l] & 0xfu) : (q[l] >> 4);
        if (kFiveBit) v |= ((qh[l] >> sub) & 1u) << 4;
        p.code(first + sub * 32 + l, v);
      }
    }
  });
  return p.finish(WeightFormat::Affine);
}

// Q6_K: two halves of 128 values; in half h, value l (0..31) of each quarter k takes its low
// nibble from ql[64h + l + 32·(k % 2)] (low nibble for k < 2, high for k ≥ 2) and its top two
// bits from qh[32h + l] bits 2k..2k+1; scale sc[8h + 2k + l / 16].
HostTensor repack_q6_k(const uint8_t* data, int64_t rows, int64_t cols, const std::string& name) {
  Packer p(rows, cols, 8, 16, DType::F32, false, name);
  for_each_block(data, rows, cols, 256, 210, [&](const uint8_t* blk, int64_t b, int64_t first) {
    const uint8_t* ql = blk;
    const uint8_t* qh = blk + 128;
    const auto* sc = reinterpret_cast<const int8_t*>(blk + 192);
    const float d = f16_to_f32(load_u16(blk + 208));
    for (int s = 0; s < 16; ++s) p.scale_f32(first / 16 + s, d * static_cast<float>(sc[s]), b);
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k)
        for (int l = 0; l < 32; ++l) {
          const uint8_t lo_byte = ql[64 * h + l + 32 * (k % 2)];
          const uint32_t lo = k < 2 ? (lo_byte & 0xfu) : (lo_byte >> 4);
          const uint32_t hi = (qh[32 * h + l] >> (2 * k)) & 3u;
          const int32_t q = static_cast<int32_t>(lo | (hi << 4)) - 32;
          p.code(first + 128 * h + 32 * k + l, static_cast<uint8_t>(static_cast<int8_t>(q)));
        }
  });
  return p.finish(WeightFormat::Symmetric);
}

}  // namespace

bool ggml_type_supported(GgmlType type) {
  for (GgmlType t : kSupported)
    if (t == type) return true;
  return false;
}

std::string supported_ggml_types() {
  std::string s;
  for (GgmlType t : kSupported) s += (s.empty() ? "" : ", ") + io::ggml_type_name(t);
  return s;
}

std::string repacked_format_name(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return "Dense F32";
    case GgmlType::F16: return "Dense F16";
    case GgmlType::BF16: return "Dense BF16";
    case GgmlType::Q8_0: return "Symmetric 8-bit g32 F16";
    case GgmlType::Q4_0: return "Symmetric 4-bit g32 F16";
    case GgmlType::Q5_0: return "Symmetric 8-bit g32 F16";
    case GgmlType::Q4_1: return "Affine 4-bit g32 F16";
    case GgmlType::Q5_1: return "Affine 8-bit g32 F16";
    case GgmlType::Q4_K: return "Affine 4-bit g32 F32";
    case GgmlType::Q5_K: return "Affine 8-bit g32 F32";
    case GgmlType::Q6_K: return "Symmetric 8-bit g16 F32";
    case GgmlType::MXFP4: return "MXFP4 g32 E8M0";
    default: return "unsupported";
  }
}

namespace {

// MXFP4 {e, qs[16]} per 32: qs[j] holds element j in its low nibble and j + 16 in its high one;
// ggml's value table is twice e2m1's and its scale half of 2^(e − 127), so the codes and the e8m0
// byte carry over unchanged: only the nibbles move to kernels/weight.h's pairwise order.
HostTensor repack_mxfp4(const uint8_t* data, int64_t rows, int64_t cols, const std::string& name) {
  Packer p(rows, cols, 4, 32, DType::U8, false, name);
  std::vector<uint8_t> scales(static_cast<size_t>(rows * (cols / 32)));
  for_each_block(data, rows, cols, 32, 17, [&](const uint8_t* blk, int64_t b, int64_t first) {
    if (blk[0] == 255) throw Error("tensor '{}': block {} has the e8m0 scale 255 (not a number)", name, b);
    scales[static_cast<size_t>(b)] = blk[0];
    for (int j = 0; j < 16; ++j) {
      p.code(first + j, blk[1 + j] & 0xfu);
      p.code(first + j + 16, blk[1 + j] >> 4);
    }
  });
  HostTensor out = p.finish(WeightFormat::Mxfp4);
  out.owned[1] = std::move(scales);
  out.weight.quant.scales = out.owned[1].data();
  return out;
}

}  // namespace

HostTensor repack_ggml_rows(GgmlType type, const uint8_t* data, int64_t rows, int64_t cols, const std::string& name) {
  auto dense = [&](DType dtype) {
    HostTensor out;
    out.weight = Weight{data, dtype, rows, cols};
    return out;
  };
  switch (type) {
    case GgmlType::F32: return dense(DType::F32);
    case GgmlType::F16: return dense(DType::F16);
    case GgmlType::BF16: return dense(DType::BF16);
    case GgmlType::Q8_0: return repack_q8_0(data, rows, cols, name);
    case GgmlType::Q4_0: return repack_q4_0(data, rows, cols, name);
    case GgmlType::Q4_1: return repack_q4_1(data, rows, cols, name);
    case GgmlType::Q5_0: return repack_q5<false>(data, rows, cols, name);
    case GgmlType::Q5_1: return repack_q5<true>(data, rows, cols, name);
    case GgmlType::Q4_K: return repack_k_affine<false>(data, rows, cols, name);
    case GgmlType::Q5_K: return repack_k_affine<true>(data, rows, cols, name);
    case GgmlType::Q6_K: return repack_q6_k(data, rows, cols, name);
    case GgmlType::MXFP4: return repack_mxfp4(data, rows, cols, name);
    default: break;
  }
  throw Error("tensor '{}' has GGUF type {}, which tachyon does not support (supported: {})", name,
              io::ggml_type_name(type), supported_ggml_types());
}

HostTensor widen_to_affine8(const HostTensor& t, int32_t group) {
  const Weight& w = t.weight;
  TACHYON_CHECK(w.format == WeightFormat::Affine || w.format == WeightFormat::Symmetric,
                "widen_to_affine8: '{}' format", static_cast<int>(w.format));
  TACHYON_CHECK(group > 0 && w.quant.group % group == 0, "widen_to_affine8: group {} does not divide {}", group,
                w.quant.group);
  const std::string name = "widened";
  Packer p(w.rows, w.cols, 8, group, DType::F32, true, name);
  const int64_t groups_per_row = w.cols / group, split = w.quant.group / group;
  // The offset that makes every code non-negative: 2^(bits − 1), or 32 for 8-bit codes in
  // [−32, 31] (Q6_K, Q5_0), whose widened codes then fit 6 bits (the CPU int8 mode streams them
  // as such: cpu/quant_pack.h).
  int64_t offset = int64_t{1} << (w.quant.bits - 1);
  if (w.format == WeightFormat::Symmetric && w.quant.bits == 8) {
    bool six = true;
    for (int64_t r = 0; r < w.rows && six; ++r)
      for (int64_t c = 0; c < w.cols && six; ++c) {
        const int32_t q = static_cast<int8_t>(kernels::code_at(w, r, c));
        six = q >= -32 && q < 32;
      }
    if (six) offset = 32;
  }
  for (int64_t r = 0; r < w.rows; ++r) {
    for (int64_t g = 0; g < groups_per_row; ++g) {
      const int64_t src = r * (w.cols / w.quant.group) + g / split, dst = r * groups_per_row + g;
      const float s = kernels::load_scale_value(w.quant.scales, w.quant.scale_dtype, src);
      p.scale_f32(dst, s, dst);
      if (w.format == WeightFormat::Affine)
        p.bias_f32(dst, kernels::load_scale_value(w.quant.biases, w.quant.scale_dtype, src), dst);
      else
        p.bias_f32(dst, -static_cast<float>(offset) * s, dst);  // a power-of-two multiple: exact
    }
    for (int64_t c = 0; c < w.cols; ++c) {
      uint32_t code = kernels::code_at(w, r, c);
      if (w.format == WeightFormat::Symmetric) {
        const int32_t q = w.quant.bits == 8 ? static_cast<int8_t>(code) : static_cast<int32_t>(code ^ 8u) - 8;
        code = static_cast<uint32_t>(q + offset);
      }
      p.code(r * w.cols + c, code);
    }
  }
  HostTensor out = p.finish(WeightFormat::Affine);
  out.shape = t.shape;
  return out;
}

HostTensor to_dense_f32(const HostTensor& t) {
  const Weight& w = t.weight;
  std::vector<uint8_t> data(static_cast<size_t>(w.rows * w.cols) * 4);
  auto* f = reinterpret_cast<float*>(data.data());
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < w.cols; ++c) {
      float v;
      if (w.quantized()) v = kernels::dequantize_element(w, r, c);
      else if (w.dtype == DType::F32) v = static_cast<const float*>(w.data)[r * w.cols + c];
      else if (w.dtype == DType::F16) v = f16_to_f32(static_cast<const uint16_t*>(w.data)[r * w.cols + c]);
      else v = bf16_to_f32(static_cast<const uint16_t*>(w.data)[r * w.cols + c]);
      f[r * w.cols + c] = v;
    }
  HostTensor out;
  out.owned.push_back(std::move(data));
  out.weight = Weight{out.owned.back().data(), DType::F32, w.rows, w.cols};
  out.shape = t.shape;
  return out;
}

HostTensor permute_rows(const HostTensor& t, const std::vector<int64_t>& perm) {
  const Weight& w = t.weight;
  TACHYON_CHECK(static_cast<int64_t>(perm.size()) == w.rows, "permute_rows: {} indices for {} rows", perm.size(),
                w.rows);
  HostTensor out;
  out.weight = w;
  out.shape = t.shape;
  out.owned.reserve(3);
  auto gather = [&](const void* src, size_t row_bytes) {
    std::vector<uint8_t> dst(row_bytes * perm.size());
    for (size_t r = 0; r < perm.size(); ++r)
      std::memcpy(dst.data() + r * row_bytes, static_cast<const uint8_t*>(src) + perm[r] * row_bytes, row_bytes);
    out.owned.push_back(std::move(dst));
    return static_cast<const void*>(out.owned.back().data());
  };
  if (!w.quantized()) {
    out.weight.data = gather(w.data, static_cast<size_t>(w.cols) * dtype_size(w.dtype));
    return out;
  }
  TACHYON_CHECK(w.format == WeightFormat::Affine || w.format == WeightFormat::Symmetric ||
                    w.format == WeightFormat::Mxfp4,
                "permute_rows: unexpected format");
  const size_t groups = static_cast<size_t>(w.cols / kernels::quant_group(w));
  out.weight.data = gather(w.data, static_cast<size_t>(w.cols * w.quant.bits / 8));
  out.weight.quant.scales = gather(w.quant.scales, groups * dtype_size(w.quant.scale_dtype));
  if (w.quant.biases) out.weight.quant.biases = gather(w.quant.biases, groups * dtype_size(w.quant.scale_dtype));
  return out;
}

}  // namespace tachyon::model
