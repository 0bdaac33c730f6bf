// The arithmetic of a token draw (kernels/token_sampling.h), written once for the host and the
// CUDA kernel (kernels/cuda/sampling.cu) so that both draw the same token from the same logits
// and uniform u, bit for bit: a request's token must not depend on whether its step drew on
// the device or on the host (batch-invariant output; DESIGN.md).
//
// Every step is exact or rounded by IEEE rules the same way on both sides:
//   p = sampling_exp(x - max x)   separately rounded float operations, no library exp
//   rank = descending p, ascending id: one 64-bit key per candidate (candidate_key)
//   mass q = trunc(p * 2^40)      an integer, so sums do not depend on their order
//   top-p, the draw: exact products of an integer mass and a float / double (scaled_floor).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TACHYON_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TACHYON_HOST_DEVICE inline
#endif

namespace tachyon::kernels::sampling_arithmetic {

// Separately rounded float operations: nvcc would contract a * b + c into one FMA, and so would
// a host compiler allowed to; these keep both sides on the same two roundings.
TACHYON_HOST_DEVICE float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
TACHYON_HOST_DEVICE float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

template <typename To, typename From>
TACHYON_HOST_DEVICE To bits_of(From v) {
  static_assert(sizeof(To) == sizeof(From));
  To out;
  memcpy(&out, &v, sizeof(out));
  return out;
}

// e^r for r <= 0 to ~2 ulp: r = n ln2 + t (Cody-Waite, n ln2's high part exact), e^t by its
// degree-7 Taylor polynomial (|t| <= 0.35: truncation < 6e-9), then the exact scale by 2^n.
// sampling_exp(0) == 1 exactly; below -104 (and for NaN) 0. Branch-free (selects only), so that
// a host loop over a row vectorises. Not cpu::exp_canonical (kernels/cpu/dot.h): that one is built
// on fma, which this file's host code (portable x86-64, no -mfma) would run in software, ~20x
// slower over a 150k vocabulary; separately rounded operations cost the same on both sides.
TACHYON_HOST_DEVICE float sampling_exp(float r) {
  constexpr float kLog2e = 1.44269504f, kLn2Hi = 0.693145751953125f, kLn2Lo = 1.42860677e-6f;
  const bool live = r > -104.f;
  r = live ? r : 0.f;
  // floor of a value in [-150.5, 0.5]: truncation, one down for negatives with a fraction (floorf
  // is a library call on x86-64 without SSE4.1).
  const float v = add_rn(mul_rn(r, kLog2e), 0.5f);
  const int truncated = static_cast<int>(v);
  const int e = static_cast<float>(truncated) > v ? truncated - 1 : truncated;  // -150 <= e <= 0
  const float n = static_cast<float>(e);
  const float t = add_rn(add_rn(r, -mul_rn(n, kLn2Hi)), -mul_rn(n, kLn2Lo));
  float y = 1.f / 5040;
  y = add_rn(mul_rn(y, t), 1.f / 720);
  y = add_rn(mul_rn(y, t), 1.f / 120);
  y = add_rn(mul_rn(y, t), 1.f / 24);
  y = add_rn(mul_rn(y, t), 1.f / 6);
  y = add_rn(mul_rn(y, t), 0.5f);
  y = add_rn(mul_rn(y, t), 1.f);
  y = add_rn(mul_rn(y, t), 1.f);
  // 2^e is subnormal below -126: scale by 2^(e + 64) (exact), then by 2^-64, rounding once.
  const bool subnormal = e < -126;
  const float scale = bits_of<float>(static_cast<uint32_t>((subnormal ? e + 64 : e) + 127) << 23);
  y = mul_rn(mul_rn(y, scale), subnormal ? 0x1p-64f : 1.f);
  return live ? y : 0.f;
}

// A candidate's probability before normalisation: 1 for the largest x (also when x - max is
// inf - inf: a temperature small enough to overflow the scaled logits).
TACHYON_HOST_DEVICE float candidate_p(float x, float max_x) {
  const float p = sampling_exp(x - max_x);  // then a select, not a branch: host loops vectorise
  return x == max_x ? 1.f : p;
}

// Rank order as one integer: larger key first. p >= 0, so its bits order like its value; among
// equal p the lower id goes first.
TACHYON_HOST_DEVICE uint64_t candidate_key(float p, uint32_t id) {
  return (static_cast<uint64_t>(bits_of<uint32_t>(p)) << 32) | (0xffffffffu - id);
}
TACHYON_HOST_DEVICE uint32_t key_id(uint64_t key) { return 0xffffffffu - static_cast<uint32_t>(key); }
TACHYON_HOST_DEVICE float key_p(uint64_t key) { return bits_of<float>(static_cast<uint32_t>(key >> 32)); }
// The smallest key of a candidate with probability >= p.
TACHYON_HOST_DEVICE uint64_t key_at_least(float p) { return static_cast<uint64_t>(bits_of<uint32_t>(p)) << 32; }

// Probability mass as an integer: p * 2^40 truncated (p in [0, 1]), from p's bits with integer
// operations (a float-to-64-bit conversion is a slow instruction on the GPU, run per candidate
// and level there). The sum of a row stays below 2^64 for up to 2^23 candidates; mass below
// 2^-40 of the top candidate's is dropped (never drawn).
TACHYON_HOST_DEVICE uint64_t candidate_mass(float p) {
  const uint32_t b = bits_of<uint32_t>(p);
  const int biased = static_cast<int>(b >> 23);  // p >= 0: no sign bit
  if (biased == 0) return 0;                     // zero or subnormal: below 2^-126
  const uint64_t m = (b & ((1u << 23) - 1)) | (1u << 23);  // p = m * 2^(biased - 150)
  const int shift = biased - 110;                          // p * 2^40 = m * 2^shift
  return shift >= 0 ? m << shift : (shift > -24 ? m >> -shift : 0);
}

__extension__ typedef unsigned __int128 uint128;  // GCC's and nvcc's, on both sides

// floor(m * 2^-shift * s) exactly, and whether it was exact (m < 2^53, shift >= 0).
TACHYON_HOST_DEVICE uint64_t scaled_floor(uint64_t m, int shift, uint64_t s, bool* exact) {
  const uint128 product = static_cast<uint128>(m) * s;
  if (shift >= 128) {
    *exact = product == 0;
    return 0;
  }
  *exact = (product & ((static_cast<uint128>(1) << shift) - 1)) == 0;
  return static_cast<uint64_t>(product >> shift);
}

// floor(u * s) for a double u in [0, 1).
TACHYON_HOST_DEVICE uint64_t floor_times(double u, uint64_t s) {
  const uint64_t b = bits_of<uint64_t>(u);
  const int biased = static_cast<int>((b >> 52) & 0x7ff);
  const uint64_t m = (b & ((uint64_t{1} << 52) - 1)) | (biased ? uint64_t{1} << 52 : 0);
  bool exact;
  return scaled_floor(m, 1075 - (biased ? biased : 1), s, &exact);
}

// ceil(f * s) for a float f in (0, 1).
TACHYON_HOST_DEVICE uint64_t ceil_times(float f, uint64_t s) {
  const uint32_t b = bits_of<uint32_t>(f);
  const int biased = static_cast<int>((b >> 23) & 0xff);
  const uint64_t m = (b & ((1u << 23) - 1)) | (biased ? 1u << 23 : 0);
  bool exact;
  const uint64_t lo = scaled_floor(m, 150 - (biased ? biased : 1), s, &exact);
  return exact ? lo : lo + 1;
}

}  // namespace tachyon::kernels::sampling_arithmetic
