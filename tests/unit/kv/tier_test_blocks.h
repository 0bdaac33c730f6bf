// The blocks the KV tier tests (host and disk) move around: a small int8 layout, blocks filled
// with a byte pattern of a seed, and a prompt of three full blocks cached by a finished sequence.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <numeric>
#include <vector>

#include "kernels/backend.h"
#include "kv/kv_cache.h"

namespace tachyon::kv {

inline const KvLayout kTierLayout{.num_layers = 2, .num_kv_heads = 2, .head_dim = 64, .block_size = 4,
                                  .num_blocks = 4, .format = kernels::KvFormat::Int8};

// Fills every layer's K and V bytes of `block` with a pattern of `seed`.
inline void fill_block(kernels::Backend& backend, const KvCache& kv, BlockId block, int seed) {
  const auto k_bytes = static_cast<size_t>(kv.layout().k_layout().block_bytes);
  const auto v_bytes = static_cast<size_t>(kv.layout().v_layout().block_bytes);
  for (int64_t l = 0; l < kv.layout().num_layers; ++l) {
    std::vector<unsigned char> k(k_bytes), v(v_bytes);
    for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<unsigned char>(i * 13 + seed * 101 + l);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<unsigned char>(i * 7 + seed * 59 + l * 3);
    const kernels::PagedKv layer = kv.layer(l);
    backend.copy_to_device(static_cast<std::byte*>(layer.k) + block * k_bytes, k.data(), k.size());
    backend.copy_to_device(static_cast<std::byte*>(layer.v) + block * v_bytes, v.data(), v.size());
  }
}

// Tokens first, first + 1, ...: n of them.
inline std::vector<int32_t> tier_prompt(int32_t n, int32_t first = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// A sequence of 3 full blocks (+ 1 token) with patterned bytes (seeds seed, seed + 1, seed + 2),
// registered, then removed (as a preempted or finished request's): its blocks are cached.
// Returns their payloads.
inline std::vector<std::vector<std::byte>> cache_prompt(kernels::Backend& backend, KvCache& kv,
                                                        const std::vector<int32_t>& t, int seed = 1) {
  const SeqId s = kv.add_sequence();
  EXPECT_TRUE(kv.reserve(s, static_cast<int32_t>(t.size())));
  std::vector<std::vector<std::byte>> payloads;
  for (int b = 0; b < 3; ++b) {
    fill_block(backend, kv, kv.block_table(s)[b], seed + b);
    payloads.push_back(kv.block_payload(kv.block_table(s)[b]));
  }
  kv.register_blocks(s, t, static_cast<int32_t>(t.size()));
  kv.remove_sequence(s);
  return payloads;
}

}  // namespace tachyon::kv
