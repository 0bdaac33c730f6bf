// Which prefix-cache block sits in which slot of the host tier (KvCache::attach_host_tier): a
// fixed number of equal slots, one block each, reused least recently used first. Bookkeeping
// only: the bytes live in host memory KvCache owns.
//
//   HostBlockIndex index(1024);
//   const int32_t slot = index.insert(hash, /*has_snapshot=*/false);  // a free or the LRU slot
//   if (auto entry = index.find(hash)) read(entry->slot);              // now the most recent
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"

namespace tachyon::kv {

class HostBlockIndex {
 public:
  struct Entry {
    int32_t slot = 0;
    bool has_snapshot = false;  // a hybrid model's recurrent-state snapshot follows the K/V
  };
  explicit HostBlockIndex(int32_t num_slots);

  int32_t num_slots() const { return num_slots_; }
  int32_t num_used() const { return static_cast<int32_t>(entries_.size()); }
  bool contains(BlockHash hash) const { return entries_.count(hash) > 0; }
  // The entry of `hash`, which becomes the most recently used; nullopt when absent.
  std::optional<Entry> find(BlockHash hash);
  // A slot for `hash` (which must be absent): a never used one, else the least recently used
  // one, whose block is dropped (counted in evictions()).
  int32_t insert(BlockHash hash, bool has_snapshot);
  void clear();
  uint64_t evictions() const { return evictions_; }

 private:
  struct Slot {
    Entry entry;
    std::list<BlockHash>::iterator lru;
  };
  int32_t num_slots_;
  std::vector<int32_t> unused_;  // slots never handed out
  std::unordered_map<BlockHash, Slot> entries_;
  std::list<BlockHash> lru_;  // front: least recently used
  uint64_t evictions_ = 0;
};

}  // namespace tachyon::kv
