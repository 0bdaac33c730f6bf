// A fast non-cryptographic 64-bit hash of bytes: checksums of files the server writes (the disk
// prefix tier), identities of cached responses and model fingerprints. It detects corruption
// and tells contents apart; it does not resist a forger (nothing here is a security boundary:
// a cache directory is the operator's own).
//
//   uint64_t h = hash64(bytes.data(), bytes.size());
//   h = hash64_combine(h, other);
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace tachyon {

inline constexpr uint64_t hash64_mix(uint64_t x) {  // splitmix64 finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline constexpr uint64_t hash64_combine(uint64_t seed, uint64_t value) {
  return hash64_mix(seed ^ (value + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2)));
}

// Four independent lanes over 32-byte strides (several GB/s), then the tail word by word.
inline uint64_t hash64(const void* data, size_t n, uint64_t seed = 0) {
  const auto* p = static_cast<const unsigned char*>(data);
  constexpr uint64_t kMul = 0x9fb21c651e98df25ull;
  uint64_t lanes[4] = {seed ^ 0x243f6a8885a308d3ull, seed ^ 0x13198a2e03707344ull, seed ^ 0xa4093822299f31d0ull,
                       seed ^ 0x082efa98ec4e6c89ull};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int j = 0; j < 4; ++j) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * j, 8);
      const uint64_t x = lanes[j] ^ (w * kMul);
      lanes[j] = ((x << 31) | (x >> 33)) * 0x87c37b91114253d5ull;
    }
  uint64_t h = hash64_mix(seed ^ n);
  for (uint64_t lane : lanes) h = hash64_combine(h, lane);
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = hash64_combine(h, w);
  }
  uint64_t tail = 0;
  for (size_t k = 0; i < n; ++i, ++k) tail |= static_cast<uint64_t>(p[i]) << (8 * k);
  return hash64_combine(h, tail);
}

inline uint64_t hash64(std::string_view text, uint64_t seed = 0) { return hash64(text.data(), text.size(), seed); }

}  // namespace tachyon
