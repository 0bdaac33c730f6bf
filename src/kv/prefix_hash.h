// Prefix-cache identity of a KV block: a hash chain over full blocks of token ids. Block i's
// hash covers its own tokens and, through its parent's hash, every token before it, so equal
// hashes mean equal prefixes (up to 64-bit collisions, ~2^-64 per pair).
#pragma once

#include <cstdint>
#include <span>

#include "kv/block_pool.h"

namespace tachyon::kv {

constexpr BlockHash kRootHash = 0x9e3779b97f4a7c15ull;

BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens);

}  // namespace tachyon::kv
