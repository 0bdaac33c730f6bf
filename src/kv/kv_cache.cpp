#include "kv/kv_cache.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include <cstring>

#include "base/error.h"
#include "base/hash64.h"
#include "kv/disk_prefix_store.h"
#include "kv/prefix_hash.h"

namespace tachyon::kv {

KvCache::KvCache(kernels::Backend& backend, const KvLayout& layout)
    : layout_(layout), pool_(layout.num_blocks), sliding_pool_(layout.splits_sliding() ? layout.num_sliding_blocks : 1) {
  TACHYON_CHECK(layout.block_size > 0 && layout.num_layers > 0, "invalid KV layout");
  TACHYON_CHECK(layout.layer_window.empty() || static_cast<int64_t>(layout.layer_window.size()) == layout.num_layers,
                "KV layout: {} layer windows for {} layers", layout.layer_window.size(), layout.num_layers);
  if (layout.splits_sliding() && layout.num_state_layers > 0)
    throw Error("a KV cache cannot both release sliding-window blocks and keep recurrent-state snapshots per block");
  const kernels::KvFormat format = layout.storage_format();
  if (const char* why = kernels::kv_format_unsupported(format, layout.head_dim))
    throw Error("KV cache format {} cannot store heads of dimension {}: {}", kernels::kv_format_name(format),
                layout.head_dim, why);
  if (!backend.supports_kv_format(format))
    throw Error("the {} backend does not store the {} KV cache format yet", backend.name(), kernels::kv_format_name(format));
  block_snapshot_.assign(static_cast<size_t>(layout.num_blocks), -1);
  snapshot_valid_.assign(static_cast<size_t>(layout.num_blocks), false);
  if (has_state()) {
    snapshot_owner_.assign(static_cast<size_t>(layout.snapshot_slots()), -1);
    snapshot_claimed_.assign(static_cast<size_t>(layout.snapshot_slots()), false);
  }
  storages_.push_back(allocate_storage(backend));
}

KvCache::Storage KvCache::allocate_storage(kernels::Backend& backend) const {
  Storage st{&backend, {}, {}, {}};
  try {
    for (int64_t l = 0; l < layout_.num_layers; ++l) {  // each layer holds its group's blocks
      const auto blocks =
          static_cast<size_t>(layout_.in_sliding_group(l) ? layout_.num_sliding_blocks : layout_.num_blocks);
      st.k.push_back(backend.allocate(blocks * layout_.k_layout().block_bytes));
      st.v.push_back(layout_.shared_kv ? st.k.back() : backend.allocate(blocks * layout_.v_layout().block_bytes));
    }
    if (has_state()) {
      const size_t state_bytes =
          static_cast<size_t>(first_snapshot_slot() + layout_.snapshot_slots()) * layout_.state_floats * sizeof(float);
      for (int64_t l = 0; l < layout_.num_state_layers; ++l)
        st.states.push_back(static_cast<float*>(backend.allocate(state_bytes)));
    }
  } catch (...) {
    // Out of memory part-way (a device's KV for a long prompt): what was taken goes back, or
    // every failed attempt would leak the layers allocated before it.
    release_storage(st);
    throw;
  }
  return st;
}

void KvCache::release_storage(Storage& st) const {
  for (void* p : st.k) st.backend->deallocate(p);
  if (!layout_.shared_kv)
    for (void* p : st.v) st.backend->deallocate(p);
  for (float* p : st.states) st.backend->deallocate(p);
  st.k.clear(), st.v.clear(), st.states.clear();
}

void KvCache::add_replica(kernels::Backend& backend) {
  if (!backend.supports_kv_format(layout_.storage_format()))
    throw Error("the {} backend does not store the {} KV cache format yet", backend.name(),
                kernels::kv_format_name(layout_.storage_format()));
  for (const Storage& st : storages_)
    if (st.backend == &backend) throw Error("this KV cache already has storage on that backend");
  storages_.push_back(allocate_storage(backend));
  if (has_host_tier()) resize_host_tier();  // a block's slot now holds this rank's heads too
}

const KvCache::Storage& KvCache::storage_on(const kernels::Backend& backend) const {
  for (const Storage& st : storages_)
    if (st.backend == &backend) return st;
  throw Error("this KV cache has no storage on the {} backend passed to the forward", backend.name());
}

KvCache::~KvCache() {
  free_host_tier();
  for (Storage& st : storages_) release_storage(st);
}

SeqId KvCache::add_sequence() {
  SeqId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<SeqId>(sequences_.size());
    sequences_.emplace_back();
  }
  if (has_state() && id >= layout_.max_sequences) {  // each live sequence owns fixed state slots
    free_ids_.push_back(id);
    throw Error("a hybrid model's KV cache holds at most {} sequences", layout_.max_sequences);
  }
  sequences_[id] = Sequence{true, 0, {}, {}};  // state_position -1: zeroed by the first prepare_state
  return id;
}

KvCache::Sequence& KvCache::sequence(SeqId seq) {
  TACHYON_CHECK(has_sequence(seq), "unknown KV sequence {}", seq);
  return sequences_[seq];
}
const KvCache::Sequence& KvCache::sequence(SeqId seq) const {
  TACHYON_CHECK(has_sequence(seq), "unknown KV sequence {}", seq);
  return sequences_[seq];
}

bool KvCache::has_sequence(SeqId seq) const {
  return seq >= 0 && seq < static_cast<SeqId>(sequences_.size()) && sequences_[seq].live;
}

void KvCache::remove_sequence(SeqId seq) {
  Sequence& s = sequence(seq);
  release_claims(s);
  for (BlockId b : s.blocks) pool_.release(b);
  for (BlockId b : s.sliding)
    if (b != kNoBlock) sliding_pool_.release(b);
  s = Sequence{};
  free_ids_.push_back(seq);
}

bool KvCache::reserve(SeqId seq, int32_t num_tokens, int32_t first_row) {
  Sequence& s = sequence(seq);
  const bool split = layout_.splits_sliding();
  if (split) release_sliding_before(s, std::min(first_row, num_tokens));
  const int32_t need = blocks_needed(num_tokens) - static_cast<int32_t>(s.blocks.size());
  if (need > 0) {
    // New blocks start at or after the sequence's end, so each is in the window of a coming row.
    if (need > pool_.num_free() || (split && need > sliding_pool_.num_free())) return false;
    for (int32_t i = 0; i < need; ++i) {
      s.blocks.push_back(*pool_.allocate());
      release_snapshot(s.blocks.back());  // fresh or evicted: whatever state it held is gone
      if (split) s.sliding.push_back(*sliding_pool_.allocate());
    }
  }
  if (num_tokens > s.num_tokens) s.num_tokens = num_tokens;
  return true;
}

void KvCache::truncate(SeqId seq, int32_t num_tokens) {
  Sequence& s = sequence(seq);
  TACHYON_CHECK(num_tokens >= 0 && num_tokens <= s.num_tokens, "truncate to {} of a sequence of {}", num_tokens,
                s.num_tokens);
  const size_t keep = static_cast<size_t>(blocks_needed(num_tokens));
  while (s.blocks.size() > keep) {
    pool_.release(s.blocks.back());
    s.blocks.pop_back();
  }
  while (s.sliding.size() > keep) {
    if (s.sliding.back() != kNoBlock) sliding_pool_.release(s.sliding.back());
    s.sliding.pop_back();
  }
  s.sliding_begin = std::min(s.sliding_begin, static_cast<int32_t>(s.sliding.size()));
  // A block that is no longer full is no longer the block its hash names.
  s.hashes.resize(std::min(s.hashes.size(), static_cast<size_t>(num_tokens / layout_.block_size)));
  s.num_tokens = num_tokens;
  if (s.state_position > num_tokens) {
    if (num_tokens - 1 >= s.ring_lo && num_tokens - 1 < s.ring_hi) {
      s.restore_from = num_tokens - 1;  // exact: the state after the last kept token, from the ring
      s.state_position = num_tokens;
    } else {
      s.state_position = -1;  // resumes from a block snapshot (resume_position)
    }
  }
  s.ring_hi = std::min(s.ring_hi, num_tokens);  // states after dropped tokens are stale
  if (has_state() && num_tokens % layout_.block_size != 0)  // the partly kept block's tail will be recomputed
    release_snapshot(s.blocks.back());
}

void KvCache::append_block(SeqId seq, BlockId block) {
  Sequence& s = sequence(seq);
  TACHYON_CHECK(s.num_tokens == static_cast<int32_t>(s.blocks.size()) * layout_.block_size,
                "append_block needs a sequence that ends on a block boundary");
  TACHYON_CHECK(!layout_.splits_sliding(), "append_block of a KV cache whose sliding layers have blocks of their own");
  s.blocks.push_back(block);
  s.num_tokens += layout_.block_size;
}

int32_t KvCache::match_prefix(SeqId seq, std::span<const int32_t> tokens, int32_t admit_tokens, bool* wait_for_room) {
  Sequence& s = sequence(seq);
  TACHYON_CHECK(s.num_tokens == 0, "match_prefix needs an empty sequence");
  const int32_t bs = layout_.block_size;
  const size_t max_blocks = tokens.empty() ? 0 : (tokens.size() - 1) / static_cast<size_t>(bs);
  BlockHash parent = kRootHash;
  // Every block of the admission comes from the free list (cached hits, loads, new blocks) but
  // hits other sequences hold; after a miss in the pool no later block of the chain is held.
  const int64_t free_at_start = pool_.num_free();
  int64_t shared = 0;
  bool room_checked = false;
  if (wait_for_room) *wait_for_room = false;
  for (size_t b = 0; b < max_blocks; ++b) {
    const BlockHash h = hash_block(parent, tokens.subspan(b * bs, static_cast<size_t>(bs)));
    auto hit = pool_.find_cached(h);
    if (hit && pool_.refcount(*hit) > 1) ++shared;
    if (!hit && !room_checked && (host_index_ || disk_)) {
      // The tiers' run of blocks from here: loaded only if the admission can then take them all.
      size_t held = 0;
      for (BlockHash ph = parent; b + held < max_blocks; ++held) {
        ph = hash_block(ph, tokens.subspan((b + held) * bs, static_cast<size_t>(bs)));
        if (!(host_index_ && host_index_->contains(ph)) && !(disk_ && disk_->contains(ph))) break;
      }
      if (held == 0) break;
      const int64_t end = std::min<int64_t>(static_cast<int64_t>(tokens.size()),
                                            static_cast<int64_t>(b + held) * bs + std::max(1, admit_tokens));
      if (free_at_start < (end + bs - 1) / bs - shared) {
        if (wait_for_room) *wait_for_room = true;
        break;
      }
      room_checked = true;
    }
    if (!hit && room_checked) {
      if (host_index_) hit = load_from_host(h);
      if (!hit && disk_) hit = load_from_disk(h);
    }
    if (!hit) break;
    s.blocks.push_back(*hit);
    s.hashes.push_back(h);
    s.num_tokens += bs;
    parent = h;
  }
  if (layout_.splits_sliding() && !s.blocks.empty()) {
    // The hit ends where the sliding group still holds the window before it.
    const size_t keep = sliding_prefix_blocks(s.hashes);
    while (s.blocks.size() > keep) {
      pool_.release(s.blocks.back());
      s.blocks.pop_back();
      s.hashes.pop_back();
      s.num_tokens -= bs;
    }
    const int32_t lo = s.num_tokens - layout_.max_window() + 1;  // the next row's first key
    s.sliding_begin = lo > 0 ? lo / bs : 0;
    s.sliding.assign(s.blocks.size(), kNoBlock);
    for (size_t b = static_cast<size_t>(s.sliding_begin); b < s.blocks.size(); ++b)
      s.sliding[b] = *sliding_pool_.find_cached(s.hashes[b]);
  }
  // Hybrid models resume their recurrent state from the snapshot of the last matched block.
  while (has_state() && !s.blocks.empty() && !has_snapshot(s.blocks.back())) {
    pool_.release(s.blocks.back());
    s.blocks.pop_back();
    s.hashes.pop_back();
    s.num_tokens -= bs;
  }
  return s.num_tokens;
}

void KvCache::register_blocks(SeqId seq, std::span<const int32_t> tokens, int32_t num_computed) {
  Sequence& s = sequence(seq);
  const int32_t bs = layout_.block_size;
  const size_t full = std::min(static_cast<size_t>(num_computed / bs), s.blocks.size());
  for (size_t b = s.hashes.size(); b < full; ++b) {
    const BlockHash parent = b == 0 ? kRootHash : s.hashes[b - 1];
    const BlockHash h = hash_block(parent, tokens.subspan(b * bs, static_cast<size_t>(bs)));
    pool_.set_hash(s.blocks[b], h);
    if (b < s.sliding.size() && s.sliding[b] != kNoBlock) sliding_pool_.set_hash(s.sliding[b], h);
    s.hashes.push_back(h);
  }
}

size_t KvCache::sliding_prefix_blocks(std::span<const BlockHash> hashes) const {
  const int32_t bs = layout_.block_size, window = layout_.max_window();
  for (size_t n = hashes.size(); n > 0; --n) {
    const int32_t lo = static_cast<int32_t>(n) * bs - window + 1;  // the first key of the row at n · bs
    bool held = true;
    for (size_t b = lo > 0 ? static_cast<size_t>(lo / bs) : 0; b < n && held; ++b) held = sliding_pool_.holds(hashes[b]);
    if (held) return n;
  }
  return 0;
}

void KvCache::release_sliding_before(Sequence& s, int32_t first_row) {
  const int32_t lo = first_row - layout_.max_window() + 1;  // the first key any coming row reads
  const int32_t end = std::min(lo > 0 ? lo / layout_.block_size : 0, static_cast<int32_t>(s.sliding.size()));
  for (; s.sliding_begin < end; ++s.sliding_begin) {
    BlockId& b = s.sliding[static_cast<size_t>(s.sliding_begin)];
    if (b != kNoBlock) sliding_pool_.release(b);  // cached if registered: a later prefix hit may revive it
    b = kNoBlock;
  }
}

int32_t KvCache::num_tokens(SeqId seq) const { return sequence(seq).num_tokens; }
const std::vector<BlockId>& KvCache::block_table(SeqId seq) const { return sequence(seq).blocks; }
const std::vector<BlockId>& KvCache::sliding_block_table(SeqId seq) const {
  const Sequence& s = sequence(seq);
  return layout_.splits_sliding() ? s.sliding : s.blocks;
}
int32_t KvCache::first_sliding_position(SeqId seq) const { return sequence(seq).sliding_begin * layout_.block_size; }

int32_t KvCache::state_slot(SeqId seq) const {
  TACHYON_CHECK(has_sequence(seq), "unknown KV sequence {}", seq);
  return seq;
}

void KvCache::release_snapshot(BlockId block) {
  const int32_t slot = block_snapshot_[block];
  if (slot >= 0) {
    snapshot_owner_[slot] = -1;
    snapshot_claimed_[slot] = false;
  }
  block_snapshot_[block] = -1;
  snapshot_valid_[block] = false;
}

// Gives `block` a snapshot slot for the forward being prepared: its own, else the oldest slot
// no forward in flight has claimed. False when every slot is claimed (no snapshot this time).
bool KvCache::claim_snapshot(BlockId block) {
  int32_t slot = block_snapshot_[block];
  const int32_t n = static_cast<int32_t>(snapshot_owner_.size());
  for (int32_t tries = 0; slot < 0 && tries < n; ++tries) {
    const int32_t candidate = next_snapshot_;
    next_snapshot_ = (next_snapshot_ + 1) % n;
    if (snapshot_claimed_[candidate]) continue;
    if (snapshot_owner_[candidate] >= 0) release_snapshot(snapshot_owner_[candidate]);
    slot = candidate;
  }
  if (slot < 0) return false;
  snapshot_owner_[slot] = block;
  snapshot_claimed_[slot] = true;
  block_snapshot_[block] = slot;
  snapshot_valid_[block] = false;  // rewritten by the forward
  return true;
}

void KvCache::release_claims(Sequence& s) {  // a forward that never committed
  for (BlockId b : s.claimed) release_snapshot(b);
  s.claimed.clear();
  if (s.state_in_flight >= 0) {  // its working state and ring entries are half-written
    s.state_position = -1;
    s.ring_lo = s.ring_hi = 0;
  }
  s.state_in_flight = -1;
}

int32_t KvCache::resume_position(SeqId seq, int32_t position) const {
  const Sequence& s = sequence(seq);
  if (!has_state() || position == 0 || position == s.state_position) return position;
  for (int32_t b = std::min<int32_t>(position / layout_.block_size, static_cast<int32_t>(s.blocks.size())); b > 0; --b)
    if (has_snapshot(s.blocks[b - 1])) return b * layout_.block_size;
  return 0;
}

void KvCache::copy_state_slot(int32_t from, int32_t to) {
  const int64_t n = layout_.state_floats;
  for (const Storage& storage : storages_)
    for (float* st : storage.states) storage.backend->copy_strided(st + from * n, n, 1, n, st + to * n, n);
}

void KvCache::prepare_state(SeqId seq, int32_t position, int32_t end) {
  Sequence& s = sequence(seq);
  if (!has_state()) return;
  release_claims(s);
  TACHYON_CHECK(resume_position(seq, position) == position,
                "sequence {}: recurrent state is at {} and cannot resume at {} (resume from {})", seq,
                s.state_position, position, resume_position(seq, position));
  TACHYON_CHECK(end >= position && end <= s.num_tokens, "prepare_state [{}, {}) of a sequence of {}", position, end,
                s.num_tokens);
  if (position == s.state_position && s.restore_from >= 0) {
    copy_state_slot(ring_slot(seq, s.restore_from), state_slot(seq));
  } else if (position != s.state_position) {
    if (position == 0) {
      const std::vector<float> zeros(static_cast<size_t>(layout_.state_floats), 0.f);
      for (const Storage& storage : storages_)
        for (float* st : storage.states)
          storage.backend->copy_to_device(st + static_cast<int64_t>(state_slot(seq)) * layout_.state_floats,
                                          zeros.data(), zeros.size() * sizeof(float));
    } else {
      copy_state_slot(snapshot_slot(s.blocks[position / layout_.block_size - 1]), state_slot(seq));
    }
  }
  s.restore_from = -1;
  s.state_position = position;
  s.state_in_flight = position;
  s.in_flight_end = end;
  const int32_t bs = layout_.block_size, interval = std::max(1, layout_.state_snapshot_interval);
  for (int32_t b = position / bs; (b + 1) * bs <= end; ++b)  // blocks whose last position is in the forward
    if ((b + 1) % interval == 0 && claim_snapshot(s.blocks[b])) s.claimed.push_back(s.blocks[b]);
}

int32_t KvCache::row_state_slot(SeqId seq, int32_t position) const {
  const Sequence& s = sequence(seq);
  if (!has_state() || s.state_in_flight < 0) return -1;
  if (layout_.state_rollback_rows > 0 && position >= s.in_flight_end - layout_.state_rollback_rows)
    return ring_slot(seq, position);  // a block snapshot of such a row is copied from the ring at commit
  const int32_t bs = layout_.block_size;
  if ((position + 1) % bs != 0) return -1;
  const BlockId block = s.blocks[position / bs];
  return std::find(s.claimed.begin(), s.claimed.end(), block) != s.claimed.end() ? snapshot_slot(block) : -1;
}

void KvCache::commit_state(SeqId seq, int32_t position, int32_t end) {
  Sequence& s = sequence(seq);
  if (!has_state()) return;
  TACHYON_CHECK(s.state_in_flight == position && position == s.state_position && s.in_flight_end == end,
                "commit_state [{}, {}) of sequence {} prepared for [{}, {})", position, end, seq, s.state_in_flight,
                s.in_flight_end);
  const int32_t bs = layout_.block_size, ring_from = end - layout_.state_rollback_rows;
  for (BlockId b : s.claimed) {
    const auto it = std::find(s.blocks.begin(), s.blocks.end(), b);
    const int32_t last = static_cast<int32_t>(it - s.blocks.begin() + 1) * bs - 1;
    if (last >= ring_from) copy_state_slot(ring_slot(seq, last), snapshot_slot(b));  // the row kept it in the ring
    snapshot_valid_[b] = true;
    snapshot_claimed_[block_snapshot_[b]] = false;
  }
  s.claimed.clear();
  s.ring_lo = s.ring_hi == position ? std::max(s.ring_lo, ring_from) : std::max(position, ring_from);
  s.ring_hi = end;
  s.state_in_flight = -1;
  s.state_position = end;
}

void KvCache::copy_positions(SeqId seq, std::span<const std::pair<int32_t, int32_t>> moves) {
  const Sequence& s = sequence(seq);
  const int32_t bs = layout_.block_size;
  const kernels::KvTensorLayout tensors[2] = {layout_.k_layout(), layout_.v_layout()};
  for (size_t i = 0; i < moves.size(); ++i) {
    const auto [from, to] = moves[i];
    TACHYON_CHECK(from >= 0 && to >= 0 && from < s.num_tokens && to < s.num_tokens,
                  "copy_position {} -> {} outside a sequence of {} tokens", from, to, s.num_tokens);
    for (size_t j = 0; j < i; ++j)
      TACHYON_CHECK(moves[j].second != from, "copy_positions: {} is read after it was written", from);
  }
  auto& copies = copies_;  // reused: tree steps move a branch every step
  for (const Storage& storage : storages_) {  // every tensor-parallel rank's heads move alike
    copies.clear();
    for (const auto& [from, to] : moves) {
      if (from == to) continue;
      auto slot = [&](const std::vector<BlockId>& table, int32_t p) {
        const BlockId b = table[static_cast<size_t>(p / bs)];
        TACHYON_CHECK(b != kNoBlock, "copy_position at {}: its sliding block left the window", p);
        return static_cast<int64_t>(b) * bs + p % bs;
      };
      // A quantized token moves with its scales: its code records and its param records.
      auto move = [&](void* base, const kernels::KvTensorLayout& t, int64_t src, int64_t dst) {
        auto* b = static_cast<std::byte*>(base);
        const kernels::KvTokenSpans from_spans = kernels::kv_token_spans(t, src), to_spans = kernels::kv_token_spans(t, dst);
        copies.push_back({b + to_spans.code_offset, b + from_spans.code_offset, static_cast<size_t>(from_spans.code_bytes)});
        if (from_spans.param_bytes > 0)
          copies.push_back({b + to_spans.param_offset, b + from_spans.param_offset, static_cast<size_t>(from_spans.param_bytes)});
      };
      for (size_t l = 0; l < storage.k.size(); ++l) {
        const std::vector<BlockId>& table = layout_.in_sliding_group(static_cast<int64_t>(l)) ? s.sliding : s.blocks;
        const int64_t src = slot(table, from), dst = slot(table, to);
        move(storage.k[l], tensors[0], src, dst);
        if (storage.v[l] != storage.k[l]) move(storage.v[l], tensors[1], src, dst);
      }
    }
    if (!copies.empty()) storage.backend->copy_on_device_many(copies);
  }
}

// ---- Disk tier ------------------------------------------------------------------------------

namespace {
constexpr uint32_t kPayloadVersion = 1;
struct PayloadHeader {
  uint32_t has_snapshot;
  uint32_t version;
};
}  // namespace

void KvCache::attach_disk_tier(std::shared_ptr<DiskPrefixStore> disk) {
  if (disk && layout_.splits_sliding())
    throw Error("the disk prefix cache stores blocks of every layer; this KV cache releases its sliding-window "
                "layers' blocks (build it with num_sliding_blocks = 0 to use a disk tier)");
  disk_ = std::move(disk);
  pool_.set_eviction_listener([this](BlockId block, BlockHash hash) { on_evict(block, hash); });
}

uint64_t KvCache::layout_fingerprint() const {
  uint64_t h = hash64_combine(0x6b7662756c6b7631ull, kPayloadVersion);
  for (int64_t v : {int64_t(layout_.storage_format()), layout_.num_layers, layout_.num_kv_heads, layout_.head_dim,
                    int64_t(layout_.block_size), int64_t(layout_.shared_kv), layout_.num_state_layers,
                    layout_.state_floats, layout_.k_layout().block_bytes, layout_.v_layout().block_bytes})
    h = hash64_combine(h, static_cast<uint64_t>(v));
  return h;
}

size_t KvCache::kv_payload_bytes() const {  // every storage's (tensor-parallel ranks: each its heads)
  return storages_.size() * static_cast<size_t>(layout_.num_layers) *
         static_cast<size_t>(layout_.k_layout().block_bytes + (layout_.shared_kv ? 0 : layout_.v_layout().block_bytes));
}

std::vector<std::byte> KvCache::block_payload(BlockId block) const {
  const bool snapshot = has_state() && has_snapshot(block);
  const size_t state_bytes =
      snapshot ? storages_.size() * static_cast<size_t>(layout_.num_state_layers * layout_.state_floats) * sizeof(float)
               : 0;
  std::vector<std::byte> out(sizeof(PayloadHeader) + kv_payload_bytes() + state_bytes);
  const PayloadHeader header{snapshot ? 1u : 0u, kPayloadVersion};
  std::memcpy(out.data(), &header, sizeof header);
  std::byte* p = out.data() + sizeof header;
  const auto k_bytes = static_cast<size_t>(layout_.k_layout().block_bytes);
  const auto v_bytes = static_cast<size_t>(layout_.v_layout().block_bytes);
  for (const Storage& storage : storages_) {
    for (size_t l = 0; l < storage.k.size(); ++l) {
      storage.backend->copy_to_host(p, static_cast<const std::byte*>(storage.k[l]) + block * k_bytes, k_bytes);
      p += k_bytes;
      if (layout_.shared_kv) continue;
      storage.backend->copy_to_host(p, static_cast<const std::byte*>(storage.v[l]) + block * v_bytes, v_bytes);
      p += v_bytes;
    }
    if (snapshot) {
      const size_t n = static_cast<size_t>(layout_.state_floats);
      for (float* st : storage.states) {
        storage.backend->copy_to_host(p, st + static_cast<size_t>(snapshot_slot(block)) * n, n * sizeof(float));
        p += n * sizeof(float);
      }
    }
  }
  return out;
}

bool KvCache::restore_block(BlockId block, std::span<const std::byte> payload) {
  PayloadHeader header;
  if (payload.size() < sizeof header) return false;
  std::memcpy(&header, payload.data(), sizeof header);
  const bool snapshot = header.has_snapshot != 0;
  const size_t state_bytes =
      storages_.size() * static_cast<size_t>(layout_.num_state_layers * layout_.state_floats) * sizeof(float);
  if (header.version != kPayloadVersion || (snapshot && !has_state()) ||
      payload.size() != sizeof header + kv_payload_bytes() + (snapshot ? state_bytes : 0))
    return false;
  const std::byte* p = payload.data() + sizeof header;
  const auto k_bytes = static_cast<size_t>(layout_.k_layout().block_bytes);
  const auto v_bytes = static_cast<size_t>(layout_.v_layout().block_bytes);
  // A snapshot goes into a slot of its own, valid at once (no forward will write it); without a
  // free slot the block is loaded without one, as if its snapshot had been recycled.
  const bool with_snapshot = snapshot && claim_snapshot(block);
  const size_t n = static_cast<size_t>(layout_.state_floats);
  for (const Storage& storage : storages_) {
    for (size_t l = 0; l < storage.k.size(); ++l) {
      storage.backend->copy_to_device(static_cast<std::byte*>(storage.k[l]) + block * k_bytes, p, k_bytes);
      p += k_bytes;
      if (layout_.shared_kv) continue;
      storage.backend->copy_to_device(static_cast<std::byte*>(storage.v[l]) + block * v_bytes, p, v_bytes);
      p += v_bytes;
    }
    if (!snapshot) continue;
    for (float* st : storage.states) {
      if (with_snapshot)
        storage.backend->copy_to_device(st + static_cast<size_t>(snapshot_slot(block)) * n, p, n * sizeof(float));
      p += n * sizeof(float);
    }
  }
  if (with_snapshot) {
    snapshot_valid_[block] = true;
    snapshot_claimed_[block_snapshot_[block]] = false;
  }
  return true;
}

std::optional<BlockId> KvCache::load_from_disk(BlockHash hash) {
  if (pool_.num_free() == 0) return std::nullopt;
  std::optional<std::vector<std::byte>> payload = disk_->get(hash);  // a miss is counted there
  if (!payload) return std::nullopt;
  const BlockId block = *pool_.allocate();  // may evict (and spill) another cached block
  release_snapshot(block);
  if (!restore_block(block, *payload)) {
    pool_.release(block);
    return std::nullopt;
  }
  pool_.set_hash(block, hash);
  ++num_disk_loaded_;
  return block;
}

void KvCache::spill_block(BlockId block, BlockHash hash) {
  if (!disk_->contains(hash)) disk_->put(hash, block_payload(block));
}

int64_t KvCache::spill_to_disk() {
  if (!disk_) return 0;
  // The most recent blocks that fit the budget, queued oldest first so that they are also the
  // most recent files on disk.
  std::vector<BlockId> blocks;
  int64_t budget = disk_->max_bytes();
  for (BlockId b : pool_.hashed_blocks_by_recency()) {
    if (disk_->contains(*pool_.hash_of(b))) continue;
    budget -= static_cast<int64_t>(kv_payload_bytes());
    if (budget < 0) break;
    blocks.push_back(b);
  }
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it)
    disk_->put(*pool_.hash_of(*it), block_payload(*it), /*wait_for_room=*/true);
  disk_->flush();
  return static_cast<int64_t>(blocks.size());
}

kernels::PagedKv KvCache::layer(int64_t index, const kernels::Backend* backend) const {
  const Storage& st = backend ? storage_on(*backend) : storages_.front();
  return {st.k.at(index), st.v.at(index), layout_.block_size, layout_.num_kv_heads, layout_.head_dim,
          layout_.storage_format()};
}

}  // namespace tachyon::kv
