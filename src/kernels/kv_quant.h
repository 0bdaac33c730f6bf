// The scalar definition of every KV codec (kernels/kv_format.h): how one (token, head) vector
// becomes a code record and a param record, and the values attention reads back. Every
// backend's write_kv produces these bytes and every attention kernel reads these values; the
// tests compare kernels against attention over kv_dequantize's output, bit for bit.
//
// Exact arithmetic (so that another backend can reproduce the codes):
//  - min, max and absmax are order-free; divisions are IEEE (correctly rounded); rounding to
//    an integer code is rint (half to even); f16 params are round-to-nearest-even.
//  - Sums that feed a param (turbo's ‖x‖², Lloyd–Max's mean and variance) are double sums in
//    element order, rounded to float at the end.
//  - Dequantization is one operation per element: fma(code, scale, min) for the affine codecs,
//    e4m3(code) · scale for fp8, code · factor for turbo keys, fma(std, level, mean) for
//    Lloyd–Max values. Vector kernels compute the same single operation per lane.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "base/dtype.h"
#include "kernels/kv_format.h"

namespace tachyon::kernels {

inline float kv_load_f32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}
inline void kv_store_f32(uint8_t* p, float f) { std::memcpy(p, &f, 4); }
inline float kv_load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}
inline void kv_store_f16(uint8_t* p, float f) {
  const uint16_t h = f32_to_f16(f);
  std::memcpy(p, &h, 2);
}

// 1/√d as TurboK8 and the query rotation multiply by it.
inline float turbo_inv_sqrt(int64_t d) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))); }

// y = H·(s ⊙ x) / √d, d a power of two: signs, then the in-place butterflies with strides
// 1, 2, 4, ... (a + b into the lower index, a − b into the upper), then the scale. y may be x.
inline void turbo_rotate(const float* x, int64_t d, float* y) {
  for (int64_t i = 0; i < d; ++i) y[i] = turbo_sign_negative(i) ? -x[i] : x[i];
  for (int64_t h = 1; h < d; h <<= 1)
    for (int64_t i = 0; i < d; i += 2 * h)
      for (int64_t j = i; j < i + h; ++j) {
        const float a = y[j], b = y[j + h];
        y[j] = a + b;
        y[j + h] = a - b;
      }
  const float s = turbo_inv_sqrt(d);
  for (int64_t i = 0; i < d; ++i) y[i] *= s;
}

namespace kv_detail {

inline void minmax(const float* x, int64_t n, float& mn, float& mx) {
  mn = x[0];
  mx = x[0];
  for (int64_t i = 1; i < n; ++i) mn = std::min(mn, x[i]), mx = std::max(mx, x[i]);
}

inline void put_nibble(uint8_t* codes, int64_t i, uint32_t c) {
  uint8_t& b = codes[i / 2];
  b = (i % 2) ? static_cast<uint8_t>((b & 0x0f) | (c << 4)) : static_cast<uint8_t>((b & 0xf0) | c);
}
inline uint32_t nibble(const uint8_t* codes, int64_t i) { return (codes[i / 2] >> ((i % 2) * 4)) & 0xfu; }

inline uint32_t lloyd_max_code(float z) {
  uint32_t c = 0;
  for (float t : kLloydMax4Threshold) c += z > t ? 1u : 0u;
  return c;
}

}  // namespace kv_detail

// Encodes x[0..d) into `codes` (code_bytes) and `params` (param_bytes). F32/BF16/F16 have no
// params (may be null).
inline void kv_quantize(KvCodec codec, const float* x, int64_t d, uint8_t* codes, uint8_t* params) {
  switch (codec) {
    case KvCodec::F32:
      std::memcpy(codes, x, static_cast<size_t>(d) * 4);
      return;
    case KvCodec::BF16:
      for (int64_t i = 0; i < d; ++i) {
        const uint16_t h = f32_to_bf16(x[i]);
        std::memcpy(codes + 2 * i, &h, 2);
      }
      return;
    case KvCodec::F16:
      for (int64_t i = 0; i < d; ++i) kv_store_f16(codes + 2 * i, x[i]);
      return;
    case KvCodec::FP8: {
      float amax = 0.f;
      for (int64_t i = 0; i < d; ++i) amax = std::max(amax, std::fabs(x[i]));
      const float scale = amax / kFp8Max;
      for (int64_t i = 0; i < d; ++i) codes[i] = scale > 0.f ? f32_to_fp8_e4m3(x[i] / scale) : 0;
      kv_store_f32(params, scale);
      return;
    }
    case KvCodec::U8Affine:
      for (int64_t g0 = 0, g = 0; g0 < d; g0 += kInt8Group, ++g) {
        const int64_t n = std::min(kInt8Group, d - g0);
        float mn, mx;
        kv_detail::minmax(x + g0, n, mn, mx);
        const float scale = (mx - mn) / 255.f;
        for (int64_t i = 0; i < n; ++i)
          codes[g0 + i] = scale > 0.f ? static_cast<uint8_t>(std::clamp(std::rint((x[g0 + i] - mn) / scale), 0.f, 255.f)) : 0;
        kv_store_f32(params + 8 * g, scale);
        kv_store_f32(params + 8 * g + 4, mn);
      }
      return;
    case KvCodec::U4Affine:
      for (int64_t g0 = 0, g = 0; g0 < d; g0 += kInt4Group, ++g) {
        const int64_t n = std::min(kInt4Group, d - g0);
        float mn, mx;
        kv_detail::minmax(x + g0, n, mn, mx);
        kv_store_f16(params + 4 * g, (mx - mn) / 15.f);
        kv_store_f16(params + 4 * g + 2, mn);
        const float scale = kv_load_f16(params + 4 * g), m = kv_load_f16(params + 4 * g + 2);
        for (int64_t i = 0; i < n; ++i) {
          const float c = scale > 0.f ? std::clamp(std::rint((x[g0 + i] - m) / scale), 0.f, 15.f) : 0.f;
          kv_detail::put_nibble(codes, g0 + i, static_cast<uint32_t>(c));
        }
      }
      return;
    case KvCodec::TurboK8: {
      float y[1024];  // d <= 1024 (kv_format_unsupported)
      turbo_rotate(x, d, y);
      float amax = 0.f;
      double xx = 0.0;
      for (int64_t i = 0; i < d; ++i) amax = std::max(amax, std::fabs(y[i])), xx += static_cast<double>(x[i]) * x[i];
      int64_t cc = 0;
      const float t = amax > 0.f ? 127.f / amax : 0.f;
      for (int64_t i = 0; i < d; ++i) {
        const int32_t c = static_cast<int32_t>(std::clamp(std::rint(y[i] * t), -127.f, 127.f));
        codes[i] = static_cast<uint8_t>(static_cast<int8_t>(c));
        cc += c * c;
      }
      kv_store_f32(params, cc > 0 ? static_cast<float>(std::sqrt(xx) / std::sqrt(static_cast<double>(cc))) : 0.f);
      return;
    }
    case KvCodec::LloydMaxV4:
      for (int64_t g0 = 0, g = 0; g0 < d; g0 += kLloydMaxGroup, ++g) {
        const int64_t n = std::min(kLloydMaxGroup, d - g0);
        double sum = 0.0;
        for (int64_t i = 0; i < n; ++i) sum += x[g0 + i];
        const float mean = static_cast<float>(sum / static_cast<double>(n));
        double var = 0.0;
        for (int64_t i = 0; i < n; ++i) {
          const double e = static_cast<double>(x[g0 + i]) - mean;
          var += e * e;
        }
        kv_store_f16(params + 4 * g, mean);
        kv_store_f16(params + 4 * g + 2, static_cast<float>(std::sqrt(var / static_cast<double>(n))));
        const float m = kv_load_f16(params + 4 * g), s = kv_load_f16(params + 4 * g + 2);
        for (int64_t i = 0; i < n; ++i)
          kv_detail::put_nibble(codes, g0 + i, s > 0.f ? kv_detail::lloyd_max_code((x[g0 + i] - m) / s) : 8u);
      }
      return;
  }
}

// The values attention reads for a record: x̂[0..d) (turbo keys: in the rotated space).
inline void kv_dequantize(KvCodec codec, const uint8_t* codes, const uint8_t* params, int64_t d, float* out) {
  switch (codec) {
    case KvCodec::F32:
      std::memcpy(out, codes, static_cast<size_t>(d) * 4);
      return;
    case KvCodec::BF16:
      for (int64_t i = 0; i < d; ++i) {
        uint16_t h;
        std::memcpy(&h, codes + 2 * i, 2);
        out[i] = bf16_to_f32(h);
      }
      return;
    case KvCodec::F16:
      for (int64_t i = 0; i < d; ++i) out[i] = kv_load_f16(codes + 2 * i);
      return;
    case KvCodec::FP8: {
      const float scale = kv_load_f32(params);
      for (int64_t i = 0; i < d; ++i) out[i] = fp8_e4m3_to_f32(codes[i]) * scale;
      return;
    }
    case KvCodec::U8Affine:
      for (int64_t g0 = 0; g0 < d; g0 += kInt8Group) {
        const uint8_t* p = params + 8 * (g0 / kInt8Group);
        const float scale = kv_load_f32(p), mn = kv_load_f32(p + 4);
        for (int64_t i = g0; i < std::min(d, g0 + kInt8Group); ++i) out[i] = std::fma(static_cast<float>(codes[i]), scale, mn);
      }
      return;
    case KvCodec::U4Affine:
      for (int64_t g0 = 0; g0 < d; g0 += kInt4Group) {
        const uint8_t* p = params + 4 * (g0 / kInt4Group);
        const float scale = kv_load_f16(p), mn = kv_load_f16(p + 2);
        for (int64_t i = g0; i < std::min(d, g0 + kInt4Group); ++i)
          out[i] = std::fma(static_cast<float>(kv_detail::nibble(codes, i)), scale, mn);
      }
      return;
    case KvCodec::TurboK8: {
      const float f = kv_load_f32(params);
      for (int64_t i = 0; i < d; ++i) out[i] = static_cast<float>(static_cast<int8_t>(codes[i])) * f;
      return;
    }
    case KvCodec::LloydMaxV4:
      for (int64_t g0 = 0; g0 < d; g0 += kLloydMaxGroup) {
        const uint8_t* p = params + 4 * (g0 / kLloydMaxGroup);
        const float mean = kv_load_f16(p), std_dev = kv_load_f16(p + 2);
        for (int64_t i = g0; i < std::min(d, g0 + kLloydMaxGroup); ++i)
          out[i] = std::fma(std_dev, kLloydMax4[kv_detail::nibble(codes, i)], mean);
      }
      return;
  }
}

}  // namespace tachyon::kernels
