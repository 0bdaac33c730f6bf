// The KV block pool: block ids, reference counts, a free list, and the prefix-cache index.
// No tensors: the storage for block i lives in KvStorage at index i.
//
// A block is in one of three states:
//   in use      refcount > 0 (held by one or more sequences' block tables)
//   cached      refcount == 0 but it still holds a full block whose content hash is known;
//               it sits in the free list and can be revived by `find_cached` until evicted
//   free        refcount == 0, no hash
// `allocate` takes the front of the free list. A released block with a hash goes to the back
// (cached blocks are evicted least recently released first, so they survive as long as
// possible); one without goes to the front and is the next one handed out, before any block
// never used and before any cached one. Reusing the blocks last written keeps the pool's
// resident memory at what its busiest moment needed: the pool is one allocation whose pages
// are mapped only when first written (kv_pool_memory_test), and handing out free blocks in
// turn made a drafter's pool (never hashed) resident in full after minutes of light traffic.
//
//   BlockPool pool(1024);
//   auto id = pool.allocate();            // std::nullopt when every block is in use
//   pool.set_hash(*id, chain_hash);       // once the block is full (prefix caching)
//   pool.release(*id);                    // refcount 0: cached, evictable
//   auto hit = pool.find_cached(chain_hash);  // revived with refcount 1
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

namespace tachyon::kv {

using BlockId = int32_t;
using BlockHash = uint64_t;

class BlockPool {
 public:
  explicit BlockPool(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_list_.size()); }  // free + cached
  int32_t num_cached() const { return static_cast<int32_t>(by_hash_.size()); }

  std::optional<BlockId> allocate();  // refcount 1, no hash
  void retain(BlockId id);            // refcount + 1 (sharing)
  void release(BlockId id);           // refcount - 1; at 0 the block joins the free list (see above)
  int32_t refcount(BlockId id) const { return blocks_[id].refcount; }

  // Prefix caching: the hash of a full block's content chain (see prefix_hash.h).
  void set_hash(BlockId id, BlockHash hash);
  std::optional<BlockHash> hash_of(BlockId id) const;
  // The block holding `hash`, retained (refcount + 1; revived from the free list if cached).
  std::optional<BlockId> find_cached(BlockHash hash);
  // Whether a block (in use or cached) holds `hash`; nothing is retained.
  bool holds(BlockHash hash) const { return by_hash_.count(hash) > 0; }
  // Drops every cached hash (e.g. after weights change); in-use blocks keep theirs.
  void clear_cache();
  // Called by `allocate` with a cached block and its hash just before the hash is dropped
  // (its content is still intact): the disk tier saves it there.
  void set_eviction_listener(std::function<void(BlockId, BlockHash)> listener) { on_evict_ = std::move(listener); }
  // Every block that holds a hash, most recently used first: in-use blocks, then cached ones
  // from the most recently released.
  std::vector<BlockId> hashed_blocks_by_recency() const;

 private:
  struct Block {
    int32_t refcount = 0;
    std::optional<BlockHash> hash;
    std::list<BlockId>::iterator free_position;
  };
  void drop_hash(BlockId id);

  std::vector<Block> blocks_;
  std::list<BlockId> free_list_;  // front: least recently released
  std::unordered_map<BlockHash, BlockId> by_hash_;
  std::function<void(BlockId, BlockHash)> on_evict_;
};

}  // namespace tachyon::kv
