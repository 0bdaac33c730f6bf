#include "kv/block_pool.h"

#include <algorithm>

#include "base/error.h"

namespace tachyon::kv {

BlockPool::BlockPool(int32_t num_blocks) : blocks_(static_cast<size_t>(num_blocks)) {
  TACHYON_CHECK(num_blocks > 0, "a KV pool needs at least one block");
  for (BlockId id = 0; id < num_blocks; ++id) blocks_[id].free_position = free_list_.insert(free_list_.end(), id);
}

std::optional<BlockId> BlockPool::allocate() {
  if (free_list_.empty()) return std::nullopt;
  const BlockId id = free_list_.front();
  free_list_.pop_front();
  if (on_evict_ && blocks_[id].hash) on_evict_(id, *blocks_[id].hash);
  drop_hash(id);
  blocks_[id].refcount = 1;
  return id;
}

void BlockPool::retain(BlockId id) {
  Block& b = blocks_.at(id);
  if (b.refcount == 0) free_list_.erase(b.free_position);
  ++b.refcount;
}

void BlockPool::release(BlockId id) {
  Block& b = blocks_.at(id);
  TACHYON_CHECK(b.refcount > 0, "block {} released more often than retained", id);
  if (--b.refcount == 0) b.free_position = free_list_.insert(b.hash ? free_list_.end() : free_list_.begin(), id);
}

void BlockPool::set_hash(BlockId id, BlockHash hash) {
  Block& b = blocks_.at(id);
  if (b.hash == hash) return;
  drop_hash(id);
  if (by_hash_.count(hash)) return;  // an identical block is already indexed; keep that one
  b.hash = hash;
  by_hash_[hash] = id;
}

std::optional<BlockHash> BlockPool::hash_of(BlockId id) const { return blocks_.at(id).hash; }

std::optional<BlockId> BlockPool::find_cached(BlockHash hash) {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  retain(it->second);
  return it->second;
}

void BlockPool::clear_cache() {
  for (auto it = by_hash_.begin(); it != by_hash_.end();) {
    if (blocks_[it->second].refcount == 0) {
      blocks_[it->second].hash.reset();
      it = by_hash_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<BlockId> BlockPool::hashed_blocks_by_recency() const {
  std::vector<BlockId> out;
  for (const auto& [hash, id] : by_hash_)
    if (blocks_[id].refcount > 0) out.push_back(id);
  std::sort(out.begin(), out.end());  // by_hash_'s order is arbitrary; keep the result reproducible
  for (auto it = free_list_.rbegin(); it != free_list_.rend(); ++it)
    if (blocks_[*it].hash) out.push_back(*it);
  return out;
}

void BlockPool::drop_hash(BlockId id) {
  Block& b = blocks_[id];
  if (!b.hash) return;
  auto it = by_hash_.find(*b.hash);
  if (it != by_hash_.end() && it->second == id) by_hash_.erase(it);
  b.hash.reset();
}

}  // namespace tachyon::kv
