#include "kv/host_block_index.h"

#include "base/error.h"

namespace tachyon::kv {

HostBlockIndex::HostBlockIndex(int32_t num_slots) : num_slots_(num_slots) {
  TACHYON_CHECK(num_slots > 0, "a host KV tier needs at least one slot");
  for (int32_t s = num_slots - 1; s >= 0; --s) unused_.push_back(s);
}

std::optional<HostBlockIndex::Entry> HostBlockIndex::find(BlockHash hash) {
  const auto it = entries_.find(hash);
  if (it == entries_.end()) return std::nullopt;
  lru_.splice(lru_.end(), lru_, it->second.lru);
  return it->second.entry;
}

int32_t HostBlockIndex::insert(BlockHash hash, bool has_snapshot) {
  TACHYON_CHECK(!contains(hash), "block {:x} is in the host tier already", hash);
  int32_t slot;
  if (!unused_.empty()) {
    slot = unused_.back();
    unused_.pop_back();
  } else {
    const BlockHash oldest = lru_.front();
    slot = entries_.at(oldest).entry.slot;
    entries_.erase(oldest);
    lru_.pop_front();
    ++evictions_;
  }
  lru_.push_back(hash);
  entries_[hash] = {{slot, has_snapshot}, std::prev(lru_.end())};
  return slot;
}

void HostBlockIndex::clear() {
  for (const auto& [hash, s] : entries_) unused_.push_back(s.entry.slot);
  entries_.clear();
  lru_.clear();
}

}  // namespace tachyon::kv
