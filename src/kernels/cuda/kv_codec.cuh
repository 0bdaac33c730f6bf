// The KV storage codecs of kernels/kv_format.h on the device: where a (slot, head) record sits,
// its dequantization eight elements at a time (the attention kernels' chunk staging, into
// registers and then the chunk's shared-memory rows: no full-precision copy of the cache), and
// its quantization by one warp per head (write_kv, the fused prologues). The arithmetic is
// kernels/kv_quant.h's, operation for operation (no contraction the scalar code does not do), so
// that a record written here has the bits the CPU writes: cuda_kv_formats_test checks it.
// Internal to src/kernels/cuda.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/kv_format.h"

namespace tachyon::kernels::cuda {

// One layer's K or V storage (KvTensorLayout on the device). Kernel arguments by value, no
// implicit padding (a launch's argument bytes are its graph key).
struct DeviceKvTensor {
  uint8_t* base = nullptr;
  int64_t block_bytes = 0;
  int32_t params_offset = 0;  // from the block start
  int32_t code_bytes = 0;     // per (slot, head)
  int32_t param_bytes = 0;    // per (slot, head)
  int32_t codec = 0;          // KvCodec
};
static_assert(sizeof(DeviceKvTensor) == 32, "DeviceKvTensor must have no padding");

// The records' index inside their block, (slot % block_size) · heads + head, fits 16 bits
// (kv_record_key): block_size · heads <= 65536.
constexpr int64_t kMaxBlockRecords = 65536;

#ifdef __CUDACC__
__device__ __forceinline__ KvCodec codec_of(const DeviceKvTensor& t) { return static_cast<KvCodec>(t.codec); }

// A (slot, head)'s record key: block << 16 | record index in the block (the same for K and V,
// whose blocks differ in bytes only).
__device__ __forceinline__ int64_t kv_record_key(int64_t slot, int block_size, int heads, int head) {
  int64_t block;
  int in_block;
  if ((block_size & (block_size - 1)) == 0) {
    const int shift = __ffs(block_size) - 1;
    block = slot >> shift;
    in_block = static_cast<int>(slot & (block_size - 1));
  } else {
    block = slot / block_size;
    in_block = static_cast<int>(slot % block_size);
  }
  return block << 16 | (in_block * heads + head);
}
__device__ __forceinline__ const uint8_t* record_codes(const DeviceKvTensor& t, int64_t key) {
  return t.base + (key >> 16) * t.block_bytes + (key & 0xffff) * t.code_bytes;
}
__device__ __forceinline__ const uint8_t* record_params(const DeviceKvTensor& t, int64_t key) {
  return t.base + (key >> 16) * t.block_bytes + t.params_offset + (key & 0xffff) * t.param_bytes;
}

// ---- reading: eight elements [e0, e0 + 8) of a record (e0 a multiple of 8) ----------------

// OCP e4m3fn code to f32 (exact: every e4m3 value is an f32), kv_quant.h fp8_e4m3_to_f32.
__device__ __forceinline__ float e4m3_to_f32(uint32_t c) {
  const uint32_t sign = (c & 0x80u) << 24, exp = (c >> 3) & 0xfu, man = c & 7u;
  if (exp == 0) {  // subnormal: man · 2^-9
    const float v = static_cast<float>(man) * 0.001953125f;
    return __uint_as_float(__float_as_uint(v) | sign);
  }
  if (exp == 15 && man == 7) return __uint_as_float(0x7fc00000u | sign);  // NaN (never written)
  return __uint_as_float(sign | ((exp + 120u) << 23) | (man << 20));
}
__device__ __forceinline__ float bf16_bits_to_f32(uint32_t h) { return __uint_as_float(h << 16); }
__device__ __forceinline__ float f16_bits_to_f32(uint32_t h) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
}

namespace {  // per translation unit (no relocatable device code)
// The 16 Lloyd-Max levels (kv_format.h kLloydMax4) in global memory: indexed by data, so not
// __constant__ (divergent constant-bank reads serialize).
__device__ const float kLloydMaxLevels[16] = {
    kLloydMax4[0], kLloydMax4[1], kLloydMax4[2],  kLloydMax4[3],  kLloydMax4[4],  kLloydMax4[5],
    kLloydMax4[6], kLloydMax4[7], kLloydMax4[8],  kLloydMax4[9],  kLloydMax4[10], kLloydMax4[11],
    kLloydMax4[12], kLloydMax4[13], kLloydMax4[14], kLloydMax4[15]};

// The decision thresholds (kLloydMax4Threshold), read with uniform indices: constant memory.
__constant__ float kLloydMaxThresholds[15] = {
    kLloydMax4Threshold[0], kLloydMax4Threshold[1], kLloydMax4Threshold[2],  kLloydMax4Threshold[3],
    kLloydMax4Threshold[4], kLloydMax4Threshold[5], kLloydMax4Threshold[6],  kLloydMax4Threshold[7],
    kLloydMax4Threshold[8], kLloydMax4Threshold[9], kLloydMax4Threshold[10], kLloydMax4Threshold[11],
    kLloydMax4Threshold[12], kLloydMax4Threshold[13], kLloydMax4Threshold[14]};
}  // namespace

// Eight elements of a record in registers as stored: the codes (up to 32 bytes) and the params
// they need. Loading first and decoding later lets a thread issue the loads of several records
// before it waits for the first (copy_coded_rows).
struct RawUnit {
  uint4 c0, c1;  // codes: f32 32 bytes; bf16/f16 16 (c0); 8-bit 8 (c0.x, c0.y); 4-bit 4 (c0.x)
  float p0, p1;  // params: fp8/turbo scale (p0); U8 scale, min; U4, LloydMax the f16 pair's bits (p0)
};
template <KvCodec C>
__device__ __forceinline__ RawUnit load_unit(const DeviceKvTensor& t, int64_t key, int e0) {
  const uint8_t* codes = record_codes(t, key);
  RawUnit u;
  u.p0 = u.p1 = 0.f;
  u.c1 = make_uint4(0u, 0u, 0u, 0u);
  if constexpr (C == KvCodec::F32) {
    u.c0 = *reinterpret_cast<const uint4*>(codes + 4 * e0);
    u.c1 = *reinterpret_cast<const uint4*>(codes + 4 * e0 + 16);
  } else if constexpr (C == KvCodec::BF16 || C == KvCodec::F16) {
    u.c0 = *reinterpret_cast<const uint4*>(codes + 2 * e0);
  } else if constexpr (C == KvCodec::FP8 || C == KvCodec::U8Affine || C == KvCodec::TurboK8) {
    const uint2 w = *reinterpret_cast<const uint2*>(codes + e0);
    u.c0 = make_uint4(w.x, w.y, 0u, 0u);
    const float* params = reinterpret_cast<const float*>(record_params(t, key));
    if constexpr (C == KvCodec::U8Affine) {
      const float2 sm = *reinterpret_cast<const float2*>(params + 2 * (e0 / kInt8Group));
      u.p0 = sm.x, u.p1 = sm.y;
    } else {
      u.p0 = params[0];
    }
  } else {  // U4Affine, LloydMaxV4: element 2i in the low nibble of byte i; groups of 32
    static_assert(kInt4Group == 32 && kLloydMaxGroup == 32, "one param pair per 32 elements");
    u.c0 = make_uint4(*reinterpret_cast<const uint32_t*>(codes + e0 / 2), 0u, 0u, 0u);
    u.p0 = *reinterpret_cast<const float*>(record_params(t, key) + 4 * (e0 / 32));
  }
  return u;
}
// The values (kv_quant.h kv_dequantize's single operation per element).
template <KvCodec C>
__device__ __forceinline__ void decode_unit(const RawUnit& u, float (&x)[8]) {
  if constexpr (C == KvCodec::F32) {
    const uint32_t w[8] = {u.c0.x, u.c0.y, u.c0.z, u.c0.w, u.c1.x, u.c1.y, u.c1.z, u.c1.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) x[i] = __uint_as_float(w[i]);
  } else if constexpr (C == KvCodec::BF16 || C == KvCodec::F16) {
    const uint32_t w[4] = {u.c0.x, u.c0.y, u.c0.z, u.c0.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (C == KvCodec::BF16) {
        x[2 * i] = bf16_bits_to_f32(w[i] & 0xffffu);
        x[2 * i + 1] = bf16_bits_to_f32(w[i] >> 16);
      } else {
        x[2 * i] = f16_bits_to_f32(w[i] & 0xffffu);
        x[2 * i + 1] = f16_bits_to_f32(w[i] >> 16);
      }
    }
  } else if constexpr (C == KvCodec::FP8 || C == KvCodec::U8Affine || C == KvCodec::TurboK8) {
    const uint32_t w[2] = {u.c0.x, u.c0.y};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t c = (w[i / 4] >> (8 * (i % 4))) & 0xffu;
      if constexpr (C == KvCodec::U8Affine) x[i] = __fmaf_rn(static_cast<float>(c), u.p0, u.p1);
      else if constexpr (C == KvCodec::FP8) x[i] = __fmul_rn(e4m3_to_f32(c), u.p0);
      else x[i] = __fmul_rn(static_cast<float>(static_cast<int8_t>(c)), u.p0);  // turbo: code · factor
    }
  } else {
    const uint32_t pb = __float_as_uint(u.p0);
    const float a = f16_bits_to_f32(pb & 0xffffu), b = f16_bits_to_f32(pb >> 16);  // U4: scale, min; LloydMax: mean, std
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t c = (u.c0.x >> (4 * i)) & 0xfu;
      if constexpr (C == KvCodec::U4Affine) x[i] = __fmaf_rn(static_cast<float>(c), a, b);
      else x[i] = __fmaf_rn(b, kLloydMaxLevels[c], a);
    }
  }
}
template <KvCodec C>
__device__ __forceinline__ void dequant8(const DeviceKvTensor& t, int64_t key, int e0, float (&x)[8]) {
  decode_unit<C>(load_unit<C>(t, key, e0), x);
}

// ---- writing: one warp encodes one (token, head) vector ----------------------------------
// x: the vector in shared memory (D <= 256 floats, every lane's writes to it visible: __syncwarp
// before); every lane of the warp calls, converged. The scalar work that feeds a param (min and max in
// element order, keeping the first extreme as std::min/std::max do; the double sums in element
// order) runs on one lane per group, as kv_quant.h does it; the per-element codes on all lanes.

// kv_quant.h f32_to_fp8_e4m3 (base/dtype.cpp), the same bit operations.
__device__ __forceinline__ uint32_t f32_to_e4m3(float f) {
  const uint32_t bits = __float_as_uint(f), sign = (bits >> 24) & 0x80u;
  if (isnan(f)) return sign | 0x7fu;
  const float a = fabsf(f);
  if (a >= 448.f) return sign | 0x7eu;
  if (a < 0.015625f) return sign | static_cast<uint32_t>(rintf(__fmul_rn(a, 512.f)));
  int exponent = static_cast<int>((bits >> 23) & 0xffu) - 127;
  const uint32_t m = bits & 0x7fffffu, rest = m & 0xfffffu;
  uint32_t keep = m >> 20;
  if (rest > 0x80000u || (rest == 0x80000u && (keep & 1u))) ++keep;
  if (keep == 8) {
    keep = 0;
    ++exponent;
  }
  const uint32_t code = (static_cast<uint32_t>(exponent + 7) << 3) | keep;
  return sign | (code > 0x7eu ? 0x7eu : code);
}
// base/dtype.h f32_to_bf16 (NaN kept a NaN).
__device__ __forceinline__ uint32_t f32_to_bf16_bits(float f) {
  uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (bits >> 16) | 0x40u;
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return bits >> 16;
}
// f16 round to nearest even (base/dtype.cpp f32_to_f16 for every non-NaN input), as bits and
// read back.
__device__ __forceinline__ uint32_t f32_to_f16_bits(float f) { return __half_as_ushort(__float2half_rn(f)); }
__device__ __forceinline__ float f16_round(float f) { return __half2float(__float2half_rn(f)); }

// kv_format.h turbo_sign_negative.
__device__ __forceinline__ bool turbo_sign_negative_dev(int64_t i) {
  uint64_t z = kTurboSignSeed + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (z >> 63) != 0;
}
// kv_quant.h turbo_rotate in place on a warp's D floats in shared memory (D a power of two): the
// same butterflies (each output one a + b or a - b of the same operands), stage by stage.
__device__ __forceinline__ void turbo_rotate_warp(float* y, int D) {
  const int lane = threadIdx.x % 32;
  for (int i = lane; i < D; i += 32)
    if (turbo_sign_negative_dev(i)) y[i] = -y[i];
  __syncwarp();
  for (int h = 1; h < D; h <<= 1) {
    for (int p = lane; p < D / 2; p += 32) {  // pair p: j = its block's start + offset
      const int j = p / h * 2 * h + p % h;
      const float a = y[j], b = y[j + h];
      y[j] = __fadd_rn(a, b);
      y[j + h] = __fsub_rn(a, b);
    }
    __syncwarp();
  }
  const float s = __double2float_rn(__ddiv_rn(1.0, __dsqrt_rn(static_cast<double>(D))));
  for (int i = lane; i < D; i += 32) y[i] = __fmul_rn(y[i], s);
  __syncwarp();
}

__device__ __forceinline__ int64_t warp_sum_int(int64_t v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// min and max of x[0..n) as kv_quant.h's minmax: the first of equal extremes (+0 vs -0).
__device__ __forceinline__ void minmax_in_order(const float* x, int n, float& mn, float& mx) {
  mn = mx = x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < mn) mn = x[i];
    if (mx < x[i]) mx = x[i];
  }
}

// Encodes x (the warp's vector; turbo keys: rotated in place, so x is scratch) into record `key`
// of t (kv_codec key; for F32 the element offset of the record). kv_quant.h kv_quantize.
__device__ __forceinline__ void store_head_record(const DeviceKvTensor& t, int64_t key, float* x, int D) {
  const int lane = threadIdx.x % 32;
  const KvCodec codec = codec_of(t);
  if (codec == KvCodec::F32) {  // not reached from the f32 paths, which store operand values themselves
    float* dst = reinterpret_cast<float*>(t.base) + key;
    for (int i = lane; i < D; i += 32) dst[i] = x[i];
    return;
  }
  uint8_t* codes = t.base + (key >> 16) * t.block_bytes + (key & 0xffff) * t.code_bytes;
  uint8_t* params = t.base + (key >> 16) * t.block_bytes + t.params_offset + (key & 0xffff) * t.param_bytes;
  switch (codec) {
    case KvCodec::F32: return;
    case KvCodec::BF16:
    case KvCodec::F16:
      for (int i = lane; i < D; i += 32)
        reinterpret_cast<uint16_t*>(codes)[i] =
            static_cast<uint16_t>(codec == KvCodec::BF16 ? f32_to_bf16_bits(x[i]) : f32_to_f16_bits(x[i]));
      return;
    case KvCodec::FP8: {
      float amax = 0.f;
      for (int i = lane; i < D; i += 32) amax = fmaxf(amax, fabsf(x[i]));
      amax = warp_max(amax);  // order-free
      const float scale = __fdiv_rn(amax, kFp8Max);
      for (int i = lane; i < D; i += 32) codes[i] = scale > 0.f ? f32_to_e4m3(__fdiv_rn(x[i], scale)) : 0;
      if (lane == 0) *reinterpret_cast<float*>(params) = scale;
      return;
    }
    case KvCodec::U8Affine:
    case KvCodec::U4Affine: {
      const bool u8 = codec == KvCodec::U8Affine;
      const int G = u8 ? static_cast<int>(kInt8Group) : static_cast<int>(kInt4Group), groups = (D + G - 1) / G;
      // Lane g < groups: group g's min and max in order and its params (U4: rounded to f16
      // first, as read back); the other lanes take them by shuffle (D <= 256: 8 groups at most).
      float scale = 0.f, mn = 0.f;
      if (lane < groups) {
        const int g0 = lane * G, n = min(G, D - g0);
        float mx;
        minmax_in_order(x + g0, n, mn, mx);
        scale = __fdiv_rn(__fsub_rn(mx, mn), u8 ? 255.f : 15.f);
        if (u8) {
          reinterpret_cast<float*>(params)[2 * lane] = scale;
          reinterpret_cast<float*>(params)[2 * lane + 1] = mn;
        } else {
          reinterpret_cast<uint32_t*>(params)[lane] = f32_to_f16_bits(scale) | f32_to_f16_bits(mn) << 16;
          scale = f16_round(scale);
          mn = f16_round(mn);
        }
      }
      const auto code = [&](int i, float top) {  // every lane calls (shuffles); i < D
        const float sc = __shfl_sync(0xffffffffu, scale, i / G), m = __shfl_sync(0xffffffffu, mn, i / G);
        return sc > 0.f ? fminf(fmaxf(rintf(__fdiv_rn(__fsub_rn(x[i], m), sc)), 0.f), top) : 0.f;
      };
      if (u8) {
        for (int base = 0; base < D; base += 32) {
          const int i = min(base + lane, D - 1);
          const float c = code(i, 255.f);
          if (base + lane < D) codes[i] = static_cast<uint8_t>(c);
        }
      } else {
        for (int base = 0; base < D / 2; base += 32) {
          const int b = min(base + lane, D / 2 - 1);
          const float lo = code(2 * b, 15.f), hi = code(2 * b + 1, 15.f);
          if (base + lane < D / 2) codes[b] = static_cast<uint8_t>(static_cast<uint32_t>(lo) | static_cast<uint32_t>(hi) << 4);
        }
      }
      return;
    }
    case KvCodec::TurboK8: {
      // ‖x‖² before the rotation overwrites x: a double sum in element order (lane 0).
      double xx = 0.0;
      if (lane == 0)
        for (int i = 0; i < D; ++i) xx = __dadd_rn(xx, __dmul_rn(static_cast<double>(x[i]), static_cast<double>(x[i])));
      __syncwarp();
      turbo_rotate_warp(x, D);
      float amax = 0.f;
      for (int i = lane; i < D; i += 32) amax = fmaxf(amax, fabsf(x[i]));
      amax = warp_max(amax);
      const float t_ = amax > 0.f ? __fdiv_rn(127.f, amax) : 0.f;
      int64_t cc = 0;
      for (int i = lane; i < D; i += 32) {
        const int c = static_cast<int>(fminf(fmaxf(rintf(__fmul_rn(x[i], t_)), -127.f), 127.f));
        codes[i] = static_cast<uint8_t>(static_cast<int8_t>(c));
        cc += c * c;
      }
      cc = warp_sum_int(cc);  // integers: order-free
      if (lane == 0)
        *reinterpret_cast<float*>(params) =
            cc > 0 ? __double2float_rn(__ddiv_rn(__dsqrt_rn(xx), __dsqrt_rn(static_cast<double>(cc)))) : 0.f;
      return;
    }
    case KvCodec::LloydMaxV4: {
      const int G = static_cast<int>(kLloydMaxGroup), groups = (D + G - 1) / G;
      // Lane g < groups: group g's double sums in element order and its f16 params (then read
      // back); the other lanes take them by shuffle.
      float mean = 0.f, sd = 0.f;
      if (lane < groups) {
        const int g0 = lane * G, n = min(G, D - g0);
        double sum = 0.0;
        for (int i = 0; i < n; ++i) sum = __dadd_rn(sum, static_cast<double>(x[g0 + i]));
        mean = __double2float_rn(__ddiv_rn(sum, static_cast<double>(n)));
        double var = 0.0;
        for (int i = 0; i < n; ++i) {
          const double e = __dsub_rn(static_cast<double>(x[g0 + i]), static_cast<double>(mean));
          var = __dadd_rn(var, __dmul_rn(e, e));
        }
        sd = __double2float_rn(__dsqrt_rn(__ddiv_rn(var, static_cast<double>(n))));
        reinterpret_cast<uint32_t*>(params)[lane] = f32_to_f16_bits(mean) | f32_to_f16_bits(sd) << 16;
        mean = f16_round(mean);
        sd = f16_round(sd);
      }
      const auto code = [&](int i) {  // every lane calls (shuffles); i < D
        const float m = __shfl_sync(0xffffffffu, mean, i / G), s_ = __shfl_sync(0xffffffffu, sd, i / G);
        if (!(s_ > 0.f)) return 8u;
        const float z = __fdiv_rn(__fsub_rn(x[i], m), s_);
        uint32_t c = 0;
#pragma unroll
        for (int k = 0; k < 15; ++k) c += z > kLloydMaxThresholds[k] ? 1u : 0u;
        return c;
      };
      for (int base = 0; base < D / 2; base += 32) {
        const int b = min(base + lane, D / 2 - 1);
        const uint32_t lo = code(2 * b), hi = code(2 * b + 1);
        if (base + lane < D / 2) codes[b] = static_cast<uint8_t>(lo | hi << 4);
      }
      return;
    }
  }
}
#endif

}  // namespace tachyon::kernels::cuda
