// The CUDA backend's device layout of quantized weights (WeightLayout::QuantFragments, see
// kernels/weight.h): where each code and each scale of an uploaded matrix lives. Plain C++ shared
// by the host packer (quant_pack.cpp) and the kernels (quant_*.cu), so that the CPU tests can pin
// every index against kernels/weight_dequant.h without a GPU.
//
// Codes follow the bf16 MMA fragments (common.cuh): a unit is 8 output rows x 32 columns, lane
// (r % 8) · 4 + (c % 8) / 2 of a warp holds the unit's 8 elements of row r at columns
// 16t + 8h + 2(c % 8 / 2) + e (t, h, e in {0, 1}), in slot j = 4t + 2h + e. One lane loads 16 bytes
// at a time: 2 units of 8-bit codes (8 bytes each) or 4 units of 4-bit codes (4 bytes each), so a
// warp's load is 512 contiguous bytes and a segment of 512 columns (16 units) is 8 or 4 loads.
//   vector (16 bytes) of lane l for unit u of row tile T: (T · vectors_per_tile + u / units_per_vector) · 32 + l
//   8-bit: byte (u % 2) · 8 + j of that vector; 4-bit: nibble n = j / 2 + 4 (j % 2) of word u % 4, i.e.
//   byte (u % 4) · 4 + n / 2, low nibble for even n. So slots 2p and 2p + 1 (neighbouring columns, one
//   bf16 pair of the fragment) are nibbles p and p + 4, 16 bits apart: one mask takes both into
//   the two halves of a bf16x2 (quant_common.cuh's pair decode).
// Rows are padded to 128 and columns to 64 (as MmaFragments); padding codes are zero and padding
// scales and biases are zero, so every padded element is exactly 0.
//
// Scales and biases: one per (row, column group of `group`), groups = ceil(cols64 / group), stored
// as f32, f16 or bf16 (QuantScale), row tile by row tile: [rows128 / 8][groups][8 rows]. So a row
// tile's scales are one contiguous run (16 · groups bytes at 16-byte offsets for 2-byte types), and
// the scales of a run of its groups too: the streaming decode kernel bulk-copies them beside their
// codes, and the 8 rows of one group are 8 neighbouring values that a warp reads in one wavefront.
// Affine/Symmetric keep their checkpoint dtype; Fp8Block's f32 block scales are repeated for each
// row of the block; Mxfp4's e8m0 exponents become bf16 (exact: bf16 has f32's exponent range).
// Dense I8 has no group scales: its per-row f32 scales ([rows128]) multiply each output after the
// reduction over the raw codes.
//
// Arithmetic (what the kernels compute; kernels/cuda/quant_common.cuh): the matmul runs every
// quantized weight as bf16_rn of its scalar definition (kernels/weight_dequant.h, computed in f32)
// in the canonical order of common.cuh, i.e. the bits of the same matrix uploaded as bf16 after
// dequantizing; Dense I8 runs the chain over the codes (exact in bf16), then × its row scale, then
// + bias. Embedding rows are the f32 scalar definition itself.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define TACHYON_HD __host__ __device__ inline
#else
#define TACHYON_HD inline
#endif

namespace tachyon::kernels::cuda {

// How the codes are read (the kernels are instantiated per kind).
enum QuantKind : int {
  kQuantAffine4 = 0,     // unsigned 4-bit: fma(q, s, b)
  kQuantAffine8 = 1,     // unsigned 8-bit: fma(q, s, b)
  kQuantSymmetric4 = 2,  // signed 4-bit: q · s
  kQuantSymmetric8 = 3,  // signed 8-bit: q · s
  kQuantFp8 = 4,         // e4m3fn: f32(q) · s
  kQuantMxfp4 = 5,       // e2m1: value(q) · s (s = 2^(e − 127))
  kQuantInt8Rows = 6,    // Dense I8: q, then × row scale after the reduction
};
// Storage of group scales and biases.
enum QuantScale : int { kScaleF32 = 0, kScaleF16 = 1, kScaleBf16 = 2 };

// The nibble of a 4-bit unit word that holds slot j (see above).
constexpr TACHYON_HD int nibble_of_slot(int j) { return j / 2 + 4 * (j % 2); }

constexpr TACHYON_HD int quant_kind_bits(int kind) {
  return kind == kQuantAffine4 || kind == kQuantSymmetric4 || kind == kQuantMxfp4 ? 4 : 8;
}

// One uploaded quantized matrix, as the kernels take it (built from its Weight by the backend).
struct QuantMatrix {
  const void* codes = nullptr;        // the layout above
  const void* scales = nullptr;       // [rows128][groups], `scale_type`
  const void* biases = nullptr;       // Affine: like scales; else null
  const float* row_scales = nullptr;  // Int8Rows: [rows128] f32
  int kind = kQuantSymmetric8;
  int scale_type = kScaleF32;
  int64_t rows = 0, cols = 0;
  int64_t group = 32;  // columns per scale (a multiple of 16; Int8Rows: unused)
  // 4-bit codes with bf16 scales whose every value bf16_rn(quant_value) is also one bf16 rounding
  // of the exact q·s (+ b): the streaming kernel may decode them as bf16 pairs (quant_common.cuh).
  // Set by the packer (bf16_pair_exact); false: the f32 decode.
  bool bf16_pairs = false;

  TACHYON_HD int bits() const { return quant_kind_bits(kind); }
  TACHYON_HD int64_t rows_padded() const { return (rows + 127) / 128 * 128; }
  TACHYON_HD int64_t cols_padded() const { return (cols + 63) / 64 * 64; }
  TACHYON_HD int64_t units_per_row_tile() const { return cols_padded() / 32; }  // kp_count
  TACHYON_HD int64_t units_per_vector() const { return bits() == 8 ? 2 : 4; }
  TACHYON_HD int64_t vectors_per_tile() const {
    return (units_per_row_tile() + units_per_vector() - 1) / units_per_vector();
  }
  TACHYON_HD int64_t code_bytes() const { return rows_padded() / 8 * vectors_per_tile() * 32 * 16; }
  TACHYON_HD int64_t groups() const { return kind == kQuantInt8Rows ? 0 : (cols_padded() + group - 1) / group; }
  TACHYON_HD int64_t scale_count() const { return rows_padded() * groups(); }
  TACHYON_HD int64_t scale_index(int64_t r, int64_t c) const { return scale_base(r) + (c / group) * 8; }
  // Where row r's scales start: its group g at scale_base(r) + 8 g.
  TACHYON_HD int64_t scale_base(int64_t r) const { return (r / 8) * groups() * 8 + r % 8; }

  // The streaming decode kernel's ring units (matmul_quant_stream.cu): unit ui of a row tile is its
  // vectors [16 ui, 16 ui + 16) (8 KB of codes: 1024 columns of 8-bit codes, 2048 of 4-bit ones)
  // and the scales of their columns' groups for the tile's 8 rows, one contiguous run from
  // stream_unit_scale_index (groups of at most 512 columns: whole groups per unit).
  static constexpr int64_t kStreamUnitVectors = 16;
  TACHYON_HD int64_t stream_unit_columns() const { return kStreamUnitVectors * units_per_vector() * 32; }
  TACHYON_HD int64_t stream_units_per_tile() const {
    return (vectors_per_tile() + kStreamUnitVectors - 1) / kStreamUnitVectors;
  }
  TACHYON_HD int64_t stream_unit_vectors(int64_t ui) const {
    const int64_t left = vectors_per_tile() - ui * kStreamUnitVectors;
    return left < kStreamUnitVectors ? left : kStreamUnitVectors;
  }
  TACHYON_HD int64_t stream_unit_groups(int64_t ui) const {
    const int64_t span = stream_unit_columns() / group, left = groups() - ui * span;
    return left < span ? left : span;
  }
  // Index of the first scale of unit ui of row tile `tile` (8 values per group: rows tile·8 ...).
  TACHYON_HD int64_t stream_unit_scale_index(int64_t tile, int64_t ui) const {
    return (tile * groups() + ui * (stream_unit_columns() / group)) * 8;
  }

  // Byte offset of element (r, c)'s code, and the bit shift of its nibble (4-bit; 0 for 8-bit).
  TACHYON_HD int64_t code_byte(int64_t r, int64_t c, int& shift) const {
    const int64_t unit = c / 32, kk = c % 32, t = kk / 16, kt = kk % 16;
    const int64_t lane = (r % 8) * 4 + (kt % 8) / 2, j = 4 * t + 2 * (kt / 8) + kt % 2;
    const int64_t upv = units_per_vector();
    const int64_t vector = ((r / 8) * vectors_per_tile() + unit / upv) * 32 + lane;
    if (bits() == 8) {
      shift = 0;
      return vector * 16 + (unit % upv) * 8 + j;
    }
    const int64_t n = nibble_of_slot(static_cast<int>(j));
    shift = static_cast<int>(n % 2) * 4;
    return vector * 16 + (unit % upv) * 4 + n / 2;
  }
};

// The code of slot j (0..7, see above) of unit `unit_in_vector` in a lane's 16-byte vector
// (words[0..3], little-endian): what the decode kernel extracts, in the packer's order.
TACHYON_HD uint32_t lane_code(const uint32_t (&words)[4], int unit_in_vector, int j, int bits) {
  if (bits == 8) {
    const uint32_t word = words[unit_in_vector * 2 + j / 4];
    return (word >> (8 * (j % 4))) & 0xffu;
  }
  return (words[unit_in_vector] >> (4 * nibble_of_slot(j))) & 0xfu;
}

}  // namespace tachyon::kernels::cuda
