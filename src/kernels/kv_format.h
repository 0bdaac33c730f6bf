// KV cache storage formats: what one layer's K (or V) block holds, byte for byte.
//
// A layer's K cache (and V cache) is an array of blocks; block b starts at b · block_bytes.
// A block holds `block_size` token slots × `num_kv_heads` heads, one record per (slot, head):
//
//   [ codes  : block_size × num_kv_heads × code_bytes  ]   record (t, h) at (t · heads + h) · code_bytes
//   [ pad to 16 bytes                                   ]
//   [ params : block_size × num_kv_heads × param_bytes ]   record (t, h) at params_offset + (t · heads + h) · param_bytes
//   [ pad to 16 bytes                                   ]
//
// Unquantized codecs (f32, bf16, f16) have no params, so their block is exactly today's
// [block_size, num_kv_heads, head_dim] array of elements. Every quantized record is
// self-contained per token and head (its scales are its own), so writing a token never
// touches another token's bytes, and moving a token (draft trees) moves its code record and
// its param record together (kv_token_spans).
//
// Codecs per (token, head) vector x[0..d) (the scalar definitions are kernels/kv_quant.h):
//   F32        4·d bytes of float.
//   BF16, F16  2·d bytes, round-to-nearest-even.
//   FP8        d bytes OCP e4m3 (e4m3fn) codes; params: f32 scale = max|x| / 448.
//              Per token·head rather than per block·head: a block's scale would have to be
//              known before its later tokens exist (or earlier codes rewritten when it grows),
//              and a single outlier token would coarsen the whole block.
//   U8Affine   d bytes unsigned codes, groups of 64 (the last may be shorter); params per
//              group: f32 scale = (max − min) / 255, f32 min.   x̂ = fma(code, scale, min)
//   U4Affine   d/2 bytes (element 2i in the low nibble of byte i, 2i+1 in the high), groups
//              of 32; params per group: f16 scale = (max − min) / 15, f16 min.
//   TurboK8    TurboQuant keys: y = H·(s ⊙ x) / √d (random signs s, Walsh–Hadamard H; d a
//              power of two), d bytes int8 codes of y (absmax / 127), params: f32 factor =
//              ‖x‖ / ‖codes‖ so that ŷ = factor · code keeps the key's L2 norm. Keys stay in
//              the rotated space: attention rotates the queries the same way (q·k = Hq·Hk).
//   LloydMaxV4 TurboQuant values: d/2 bytes of 4-bit indices into the 16-level Lloyd–Max
//              codebook of N(0, 1), groups of 32; params per group: f16 mean, f16 std.
//              x̂ = fma(std, codebook[code], mean)
//
// Formats pick a codec for K and one for V (turbo: TurboK8 + LloydMaxV4; the others the same
// codec for both). MLA latent caches (shared K/V) keep f32 or bf16 and recurrent state of
// hybrid models stays f32 whatever the format (kv_storage_format).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tachyon::kernels {

enum class KvFormat : uint8_t { F32, BF16, F16, FP8, Int8, Int4, Turbo };
enum class KvCodec : uint8_t { F32, BF16, F16, FP8, U8Affine, U4Affine, TurboK8, LloydMaxV4 };

inline constexpr int64_t kInt8Group = 64;     // U8Affine elements per scale/min pair
inline constexpr int64_t kInt4Group = 32;     // U4Affine elements per scale/min pair
inline constexpr int64_t kLloydMaxGroup = 32; // LloydMaxV4 elements per mean/std pair
inline constexpr float kFp8Max = 448.f;       // largest finite e4m3fn magnitude

// The 16 reconstruction levels of the Lloyd–Max quantizer of a standard Gaussian (ascending),
// and the decision thresholds between them (midpoints): code = #{k : z > threshold[k]}.
inline constexpr float kLloydMax4[16] = {-2.732590f, -2.069017f, -1.618046f, -1.256231f, -0.942340f, -0.656759f,
                                         -0.388048f, -0.128395f, 0.128395f,  0.388048f,  0.656759f,  0.942340f,
                                         1.256231f,  1.618046f,  2.069017f,  2.732590f};
inline constexpr float kLloydMax4Threshold[15] = {
    -2.4008035f, -1.8435315f, -1.4371385f, -1.0992855f, -0.7995495f, -0.5224035f, -0.2582215f, 0.f,
    0.2582215f,  0.5224035f,  0.7995495f,  1.0992855f,  1.4371385f,  1.8435315f,  2.4008035f};

// TurboQuant's random sign of dimension i (the same for every layer and head): bit 63 of
// splitmix64(kTurboSignSeed + i); 1 means −1.
inline constexpr uint64_t kTurboSignSeed = 0x7ac4b0f1e5d3c2a9ull;
inline constexpr bool turbo_sign_negative(int64_t i) {
  uint64_t z = kTurboSignSeed + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (z >> 63) != 0;
}

std::string_view kv_format_name(KvFormat format);                 // "f32", "bf16", "f16", "fp8", "int8", "int4", "turbo"
std::optional<KvFormat> kv_format_from_name(std::string_view name);  // inverse (not "auto")

inline constexpr KvCodec kv_codec(KvFormat format, bool value) {
  switch (format) {
    case KvFormat::F32: return KvCodec::F32;
    case KvFormat::BF16: return KvCodec::BF16;
    case KvFormat::F16: return KvCodec::F16;
    case KvFormat::FP8: return KvCodec::FP8;
    case KvFormat::Int8: return KvCodec::U8Affine;
    case KvFormat::Int4: return KvCodec::U4Affine;
    case KvFormat::Turbo: return value ? KvCodec::LloydMaxV4 : KvCodec::TurboK8;
  }
  return KvCodec::F32;
}

inline constexpr bool kv_format_quantized(KvFormat f) {
  return f != KvFormat::F32 && f != KvFormat::BF16 && f != KvFormat::F16;
}
// Turbo keys are stored rotated: attention rotates its queries (kv_quant.h turbo_rotate).
inline constexpr bool kv_format_rotates_keys(KvFormat f) { return f == KvFormat::Turbo; }

// The format a layer actually stores for a requested one. MLA latent caches (shared K/V) are
// read as keys and, through the absorbed up-projection, as values: they keep f32 under f32
// and bf16 otherwise (the latent is small already and its errors reach both scores and values).
inline constexpr KvFormat kv_storage_format(KvFormat requested, bool shared_kv) {
  if (!shared_kv) return requested;
  return requested == KvFormat::F32 ? KvFormat::F32 : KvFormat::BF16;
}

// Why a format cannot store heads of `head_dim`, or null when it can.
const char* kv_format_unsupported(KvFormat format, int64_t head_dim);

inline constexpr int64_t kv_groups(int64_t d, int64_t group) { return (d + group - 1) / group; }

inline constexpr int64_t kv_code_bytes(KvCodec c, int64_t d) {
  switch (c) {
    case KvCodec::F32: return 4 * d;
    case KvCodec::BF16:
    case KvCodec::F16: return 2 * d;
    case KvCodec::FP8:
    case KvCodec::U8Affine:
    case KvCodec::TurboK8: return d;
    case KvCodec::U4Affine:
    case KvCodec::LloydMaxV4: return (d + 1) / 2;
  }
  return 0;
}

inline constexpr int64_t kv_param_bytes(KvCodec c, int64_t d) {
  switch (c) {
    case KvCodec::F32:
    case KvCodec::BF16:
    case KvCodec::F16: return 0;
    case KvCodec::FP8:
    case KvCodec::TurboK8: return 4;
    case KvCodec::U8Affine: return 8 * kv_groups(d, kInt8Group);
    case KvCodec::U4Affine: return 4 * kv_groups(d, kInt4Group);
    case KvCodec::LloydMaxV4: return 4 * kv_groups(d, kLloydMaxGroup);
  }
  return 0;
}

inline constexpr int64_t kv_align16(int64_t n) { return (n + 15) / 16 * 16; }

// Where one layer's K or V records sit (see the top of this file).
struct KvTensorLayout {
  KvCodec codec = KvCodec::F32;
  int64_t code_bytes = 0;     // per (slot, head)
  int64_t param_bytes = 0;    // per (slot, head)
  int64_t params_offset = 0;  // from the block start
  int64_t block_bytes = 0;
  int64_t heads = 0;
  int32_t block_size = 0;

  // Byte offsets, from the tensor base, of the records of (global slot, head);
  // slot = block · block_size + offset in block.
  int64_t code_offset(int64_t slot, int64_t head) const {
    return slot / block_size * block_bytes + (slot % block_size * heads + head) * code_bytes;
  }
  int64_t param_offset(int64_t slot, int64_t head) const {
    return slot / block_size * block_bytes + params_offset + (slot % block_size * heads + head) * param_bytes;
  }
};

inline constexpr KvTensorLayout kv_tensor_layout(KvCodec c, int32_t block_size, int64_t heads, int64_t d) {
  KvTensorLayout l;
  l.codec = c;
  l.code_bytes = kv_code_bytes(c, d);
  l.param_bytes = kv_param_bytes(c, d);
  l.heads = heads;
  l.block_size = block_size;
  const int64_t codes = block_size * heads * l.code_bytes;
  if (l.param_bytes == 0) {
    l.params_offset = codes;
    l.block_bytes = codes;
  } else {
    l.params_offset = kv_align16(codes);
    l.block_bytes = kv_align16(l.params_offset + block_size * heads * l.param_bytes);
  }
  return l;
}

// One slot's bytes of one tensor: its code records (all heads, contiguous) and its param
// records (all heads, contiguous). Copying a token copies both spans.
struct KvTokenSpans {
  int64_t code_offset, code_bytes, param_offset, param_bytes;
};
inline KvTokenSpans kv_token_spans(const KvTensorLayout& l, int64_t slot) {
  return {l.code_offset(slot, 0), l.heads * l.code_bytes, l.param_bytes ? l.param_offset(slot, 0) : 0,
          l.heads * l.param_bytes};
}

}  // namespace tachyon::kernels
