// A weight matrix as kernels see it: [rows, cols] in its storage dtype, y = x · Wᵀ (HF
// nn.Linear layout: one row per output feature).
//
// Layouts:
//   RowMajor  element (r, c) at r·cols + c (checkpoint order; what the reference backend uses)
//   Panel64   rows grouped in panels of 64 (zero-padded), each panel stored k-major:
//             element (r, c) at ((r / 64)·cols + c)·64 + r % 64. A matmul then streams one
//             contiguous panel per 64 outputs and every output reduces over k in order, which
//             makes decode a single sequential DRAM stream (2x the bandwidth of 8 row
//             streams on the CPUs we measured) and keeps every kernel bit-compatible.
//             bf16 panels interleave each group of 32 outputs: output g·32 + i sits at
//             g·32 + 2·(i % 16) + i / 16, so a vector of 16-bit pairs turns into f32 outputs
//             g·32 + [0, 16) with one shift and g·32 + [16, 32) with one mask (no widening
//             shuffle: the conversion costs 1 op per 16 weights instead of 2 per 8).
//             Quantized formats (CPU backend, cpu/quant_pack.h) keep their codes and scales:
//             codes  panel p, step k: 64 outputs' codes contiguous, panel p's k = c at
//                    (p·cols + c)·64·bits/8 bytes. 8-bit: byte j = output j. 4-bit: 32 bytes,
//                    byte j holds output j (low nibble) and output j + 32 (high nibble), so
//                    one zero-extension of 16 bytes gives outputs [0,16) and, shifted, [32,48).
//             scales (and Affine biases) per (panel, group of `quant.group` columns), the
//                    panel's 64 outputs contiguous: entry ((p·G + c / group)·64 + r % 64),
//                    G = ceil(cols / group), in `quant.scale_dtype` as stored (F16/BF16/e8m0
//                    are converted in registers). Fp8Block's block scales are expanded to every
//                    (panel, block column, output) as F32; Mxfp4's group is 32. Padding rows
//                    hold code 0 and scale 0. weight_dequant.h reads one element of either layout.
//   Panel64Dot  (CPU, int8-activation mode: cpu/isa/matmul_int8.h) Symmetric / Affine codes of
//             4 or 8 bits, group a multiple of 32, cols a multiple of 32, laid out for integer dot
//             products (VNNI vpdpbusd, AMX tdpbsud): 64-output panels as Panel64, but each 32-bit
//             word holds one output's codes at 4 consecutive k. 8-bit: quad k/4 of panel p at
//             (p·cols + k − k % 4)·64 bytes, output j's codes at 4j + k % 4 within it (256 bytes:
//             one AMX B-tile row per 16 outputs). 4-bit: octet k/8 at (p·cols + k − k % 8)·32
//             bytes, byte 4j + k % 4 holds k % 8 < 4 in its low nibble, else in its high one.
//             Codes are stored unsigned, u = q + z0 (z0 = 128 Symmetric 8-bit, 8 Symmetric 4-bit,
//             0 Affine) so that u8 x s8 instructions take them; scales and biases as Panel64.
//             Compact forms (the packer picks them when they hold the same values exactly, so a
//             GGUF K-quant streams about its file's bytes instead of 8-bit codes and F32 scales):
//             6-bit (quant.bits = 6): 8-bit codes that fit 6 bits, u = q + 32 Symmetric (Q6_K,
//             Q5_0) or q Affine (Q5_K, Q5_1): per 16 columns k0 of panel p, at (p·cols + k0)·48
//             bytes, 512 bytes of low nibbles as the 4-bit form's two octets, then 256 bytes
//             whose byte 4j + c % 4 holds, in bits 2·(c % 16 / 4) and up, the top two bits of
//             output j's code at column c. Factored scales (quant.scale_dtype = I8): F32 scales
//             (and biases) that are an int8 multiple of one F32 factor per row and 256 columns
//             (K-quants' d·sc and dmin·m): scales holds the int8 multipliers where Panel64 holds
//             a scale, then, at byte factor_offset (weight_dequant.h), one F32 factor per
//             (panel, 256 columns, output) at ((p·cols / 256 + c / 256)·64 + r % 64); the
//             scale is f32(factor · f32(multiplier)), the stored F32 value bit for bit.
//   MmaFragments  (CUDA) bf16, rows padded to 128 and cols to 64 with zeros, stored as the B
//             operands of mma.m16n8k16: units of 8 rows x 32 cols, unit (r/8, c/32) at
//             ((r/8)·(cols64/32) + c/32)·256 elements; inside a unit, lane (r%8)·4 + (c%8)/2
//             holds 8 elements: for t = c%32/16 and h = c%16/8 the pair at (2t + h)·2 + c%2.
//             Each lane's fragment is one 16-byte load (see kernels/cuda/common.cuh).
//   QuantFragments  (CUDA) a quantized format's codes in the MmaFragments order at their own
//             width (4 or 8 bits: one 16-byte load per lane covers 4 or 2 units), rows padded to
//             128 and cols to 64 with zero codes; `quant.scales`/`biases` are device arrays of one
//             value per (padded row, group) in `quant.scale_dtype`, zero in the padding; Dense I8
//             keeps its f32 row scales in `scales`. Decode kernels stream the packed bytes once and
//             dequantize in registers. Exact offsets: kernels/cuda/quant_layout.h (index_of: -1,
//             codes are not addressable as elements).
//
// Formats (what one stored element means). Loaders (model/) repack every published quantized
// layout into one of these once, at load; the model never sees which one a weight uses.
//   Dense      `dtype` elements: F32, BF16, F16; or I8 with one f32 `scales` entry per row
//              (int8 per output channel: the chain over k runs on the raw codes, then × scale).
//   Affine     unsigned `quant.bits`-bit codes q (4 or 8) with a scale s and a bias b per row and
//              group of `quant.group` columns: w = fma(q, s, b) in f32. (MLX affine, AWQ/GPTQ
//              with b = −z·s, GGUF Q4_1/Q5_1/K-quants with their minimums.)
//   Symmetric  signed codes q (two's complement, 4 or 8 bits) and a scale per row and group:
//              w = q · s. (GGUF Q8_0/Q4_0/Q5_0 with q − 8 etc., compressed-tensors symmetric.)
//   Fp8Block   e4m3fn bytes with one f32 scale per `quant.group` x `quant.group` block
//              (row / group, col / group): w = f32(q) · s. (quant_method fp8, block [128, 128].)
//   Mxfp4      e2m1 codes (4 bits) and one e8m0 byte e per row and 32 columns:
//              w = e2m1(q) · 2^(e − 127). (gpt-oss experts.)
// Host (RowMajor) packing of codes: 8-bit codes one byte each, row r's at r·cols + c; 4-bit codes
// two per byte, element (r, c) in byte (r·cols + c) / 2, the low nibble for even c. Scales and
// biases are row-major [rows, cols / group] in `quant.scale_dtype` (F32, F16 or BF16; Mxfp4: U8
// e8m0; Fp8Block: F32 [ceil(rows / group), ceil(cols / group)]). Backends repack codes, scales
// and biases together into their own layouts (CPU: Panel64, see the CPU backend) and must give
// the bits of the scalar definition above; kernels/reference/rowwise.h dequantizes one element.
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace tachyon::kernels {

using tachyon::DType;

enum class WeightLayout : uint8_t { RowMajor, Panel64, MmaFragments, QuantFragments, Panel64Dot };
enum class WeightFormat : uint8_t { Dense, Affine, Symmetric, Fp8Block, Mxfp4 };

struct QuantParams {
  uint8_t bits = 0;              // Affine / Symmetric: 4 or 8; Fp8Block: 8; Mxfp4: 4
  int32_t group = 0;             // columns per scale (Fp8Block: the square block's edge)
  DType scale_dtype = DType::F32;
  const void* scales = nullptr;
  const void* biases = nullptr;  // Affine only
};

struct Weight {
  const void* data = nullptr;
  DType dtype = DType::F32;
  int64_t rows = 0;  // output features (or vocabulary entries for embeddings)
  int64_t cols = 0;  // input features (1-D weights: rows = 1)
  WeightLayout layout = WeightLayout::RowMajor;
  WeightFormat format = WeightFormat::Dense;  // not Dense: `data` holds codes, `dtype` is U8
  QuantParams quant;
  // I8 weights (a drafter's, Backend::upload_draft_weight): element (r, c) is data's int8 value
  // times scales[r] (one f32 per row; Panel64: per padded row).
  const float* scales = nullptr;
  // `--quantize-decode`: the decode copy of this weight (backend memory, owned by the backend,
  // Backend::with_decode_copy), a quantized form of the same matrix that decode and verify rows
  // read while prefill rows read this one (Backend::set_decode_rows says which rows are which);
  // null: every row reads this weight.
  const Weight* decode = nullptr;
  bool empty() const { return data == nullptr; }
  bool quantized() const { return format != WeightFormat::Dense; }
  // The weight rows of one kind read: for decode rows the decode copy where there is one, else
  // this weight; the result carries no decode copy of its own.
  Weight of_kind(bool decode_rows) const {
    Weight w = decode_rows && decode ? *decode : *this;
    w.decode = nullptr;
    return w;
  }

  static constexpr int64_t kPanel = 64;
  int64_t index_of(int64_t r, int64_t c) const {
    switch (layout) {
      case WeightLayout::RowMajor: return r * cols + c;
      case WeightLayout::Panel64: {
        const int64_t j = r % kPanel, slot = dtype == DType::BF16 ? j / 32 * 32 + 2 * (j % 16) + j % 32 / 16 : j;
        return ((r / kPanel) * cols + c) * kPanel + slot;
      }
      case WeightLayout::MmaFragments: {
        const int64_t kk = c % 32, t = kk / 16, kt = kk % 16, units_per_row = (cols + 63) / 64 * 2;
        const int64_t lane = (r % 8) * 4 + (kt % 8) / 2, reg = 2 * t + (kt >= 8 ? 1 : 0);
        return (((r / 8) * units_per_row + c / 32) * 32 + lane) * 8 + reg * 2 + kt % 2;
      }
      case WeightLayout::QuantFragments:
      case WeightLayout::Panel64Dot: return -1;
    }
    return -1;
  }
};

}  // namespace tachyon::kernels
