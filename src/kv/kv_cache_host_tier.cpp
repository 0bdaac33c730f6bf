// KvCache's host tier (kv_cache.h, "swap space"): evicted prefix-cache blocks copied to host
// memory and back. A slot of one storage holds each layer's K block then V block in the storage
// format (params included), then each state layer's snapshot when the block has one.
#include <algorithm>

#include "base/byte_size.h"
#include "base/error.h"
#include "kv/disk_prefix_store.h"
#include "kv/kv_cache.h"

namespace tachyon::kv {

namespace {
constexpr size_t kSlotAlignment = 256;  // each slot starts where a DMA transfer runs at full speed
}

size_t KvCache::host_storage_bytes() const {
  const size_t kv = kv_payload_bytes() / storages_.size();
  const size_t state = static_cast<size_t>(layout_.num_state_layers * layout_.state_floats) * sizeof(float);
  return (kv + state + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment;
}

void KvCache::attach_host_tier(int64_t max_bytes) {
  if (layout_.splits_sliding())
    throw Error("the host KV tier stores blocks of every layer; this KV cache releases its sliding-window layers' "
                "blocks (build it with num_sliding_blocks = 0 to use a host tier)");
  TACHYON_CHECK(!has_host_tier(), "this KV cache has a host tier already");
  host_tier_bytes_ = max_bytes;
  resize_host_tier();
  pool_.set_eviction_listener([this](BlockId block, BlockHash hash) { on_evict(block, hash); });
}

void KvCache::resize_host_tier() {
  // Only before anything was swapped: a replica is added at the first forward, before any
  // registered block can have been evicted.
  TACHYON_CHECK(!host_index_ || host_index_->num_used() == 0, "the host KV tier cannot change shape once it holds blocks");
  free_host_tier();
  const int64_t slots = host_tier_bytes_ / static_cast<int64_t>(host_slot_bytes());
  if (slots < 1)
    throw Error("the KV swap space of {} holds no block: one block of this model takes {}",
                format_byte_size(host_tier_bytes_), format_byte_size(static_cast<int64_t>(host_slot_bytes())));
  const int32_t num_slots = static_cast<int32_t>(std::min<int64_t>(slots, INT32_MAX));
  for (const Storage& st : storages_)
    host_memory_.push_back(static_cast<std::byte*>(
        st.backend->allocate_host(static_cast<size_t>(num_slots) * host_storage_bytes())));
  host_index_.emplace(num_slots);
}

void KvCache::free_host_tier() {
  for (size_t i = 0; i < host_memory_.size(); ++i) storages_[i].backend->deallocate_host(host_memory_[i]);
  host_memory_.clear();
  host_index_.reset();
}

HostTierStats KvCache::host_tier_stats() const {
  HostTierStats s = host_stats_;
  if (host_index_) {
    s.evictions = host_index_->evictions();
    s.slots = host_index_->num_slots();
    s.slots_used = host_index_->num_used();
    s.slot_bytes = static_cast<int64_t>(host_slot_bytes());
  }
  return s;
}

void KvCache::on_evict(BlockId block, BlockHash hash) {
  if (host_index_) swap_out(block, hash);
  if (disk_) spill_block(block, hash);
}

void KvCache::host_copies(size_t storage, BlockId block, int32_t slot, bool snapshot, bool to_host,
                          std::vector<kernels::Backend::DeviceCopy>& copies) const {
  const Storage& st = storages_[storage];
  std::byte* host = host_memory_[storage] + static_cast<size_t>(slot) * host_storage_bytes();
  auto add = [&](void* device, size_t bytes) {
    copies.push_back(to_host ? kernels::Backend::DeviceCopy{host, device, bytes}
                             : kernels::Backend::DeviceCopy{device, host, bytes});
    host += bytes;
  };
  const auto k_bytes = static_cast<size_t>(layout_.k_layout().block_bytes);
  const auto v_bytes = static_cast<size_t>(layout_.v_layout().block_bytes);
  for (size_t l = 0; l < st.k.size(); ++l) {
    add(static_cast<std::byte*>(st.k[l]) + static_cast<size_t>(block) * k_bytes, k_bytes);
    if (!layout_.shared_kv) add(static_cast<std::byte*>(st.v[l]) + static_cast<size_t>(block) * v_bytes, v_bytes);
  }
  if (!snapshot) return;
  const size_t n = static_cast<size_t>(layout_.state_floats);
  for (float* state : st.states) add(state + static_cast<size_t>(snapshot_slot(block)) * n, n * sizeof(float));
}

// The block is still intact (the pool calls before handing it out): its bytes are copied out
// ahead of whatever the new owner's forward writes there (swap_copy's ordering).
void KvCache::swap_out(BlockId block, BlockHash hash) {
  if (host_index_->contains(hash)) return;  // swapped in earlier and unchanged: the slot has it
  const bool snapshot = has_state() && has_snapshot(block);
  const int32_t slot = host_index_->insert(hash, snapshot);
  std::vector<kernels::Backend::DeviceCopy> copies;
  for (size_t i = 0; i < storages_.size(); ++i) {
    copies.clear();
    host_copies(i, block, slot, snapshot, /*to_host=*/true, copies);
    storages_[i].backend->swap_copy(copies, /*to_host=*/true);
    for (const auto& c : copies) host_stats_.swapped_out_bytes += c.bytes;
  }
  ++host_stats_.swapped_out_blocks;
}

std::optional<BlockId> KvCache::load_from_host(BlockHash hash) {
  // Touched first (the most recent slot), so the eviction the allocation may cause does not
  // take it; with a single slot it may: then it is a miss.
  if (!host_index_->find(hash) || pool_.num_free() == 0) return std::nullopt;
  const BlockId block = *pool_.allocate();
  release_snapshot(block);
  const std::optional<HostBlockIndex::Entry> entry = host_index_->find(hash);
  if (!entry) {
    pool_.release(block);
    return std::nullopt;
  }
  // A snapshot goes into a slot of its own, valid at once; without a free slot the block comes
  // back without one, as if its snapshot had been recycled (match_prefix then stops before it).
  const bool with_snapshot = entry->has_snapshot && claim_snapshot(block);
  std::vector<kernels::Backend::DeviceCopy> copies;
  for (size_t i = 0; i < storages_.size(); ++i) {
    copies.clear();
    host_copies(i, block, entry->slot, with_snapshot, /*to_host=*/false, copies);
    storages_[i].backend->swap_copy(copies, /*to_host=*/false);
    for (const auto& c : copies) host_stats_.swapped_in_bytes += c.bytes;
  }
  if (with_snapshot) {
    snapshot_valid_[block] = true;
    snapshot_claimed_[block_snapshot_[block]] = false;
  }
  pool_.set_hash(block, hash);
  ++host_stats_.swapped_in_blocks;
  return block;
}

}  // namespace tachyon::kv
