// The paged KV cache of one model: a BlockPool, one block table per sequence, and the
// per-layer K/V storage on the backend's device.
//
// Sequences are identified by small integers handed out by `add_sequence`. A sequence's
// length is the number of token positions it has KV for (or is about to get: `reserve`
// allocates blocks before a forward writes them). `truncate` rolls a sequence back (rejected
// speculative tokens): blocks past the new length are released, nothing is copied.
//
//   KvCache kv(backend, {.num_layers = 6, .num_kv_heads = 2, .head_dim = 64, .num_blocks = 512});
//   SeqId s = kv.add_sequence();
//   if (!kv.reserve(s, 40)) { /* out of blocks: nothing changed */ }
//   model.forward(batch, kv);   // writes positions [0, 40) of s
//   kv.truncate(s, 37);         // drop the last 3 positions
//   kv.remove_sequence(s);      // every block back to the pool
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "kv/block_pool.h"
#include "kv/host_block_index.h"

namespace tachyon::kv {

using SeqId = int32_t;
class DiskPrefixStore;

// What the host tier (KvCache::attach_host_tier) moved.
struct HostTierStats {
  uint64_t swapped_out_blocks = 0, swapped_out_bytes = 0;  // device -> host, at the pool's evictions
  uint64_t swapped_in_blocks = 0, swapped_in_bytes = 0;    // host -> device, at prefix lookups
  uint64_t evictions = 0;  // blocks the tier dropped for newer ones (a later lookup recomputes them)
  int32_t slots = 0, slots_used = 0;
  int64_t slot_bytes = 0;
};
inline constexpr BlockId kNoBlock = -1;  // a sliding table's entry whose block was released

struct KvLayout {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int32_t block_size = 16;
  int32_t num_blocks = 0;
  // V is K: one tensor per layer, handed out as both k and v (MLA's latent cache: the
  // compressed latent + rope key of each token serve as key and, through the absorbed
  // up-projection, as value).
  bool shared_kv = false;
  // How K and V are stored (kernels/kv_format.h). MLA's shared latent cache keeps f32 or bf16
  // (storage_format); the recurrent state below is always f32.
  kernels::KvFormat format = kernels::KvFormat::F32;
  // Recurrent state of linear-attention layers (hybrid models): `num_state_layers` layers of
  // `state_floats` floats per live sequence (its working state), plus a pool of snapshots
  // (the state after a block's last token) taken at every `state_snapshot_interval`-th block of
  // a sequence, so a prefix-cache hit or a rollback resumes at such a block boundary. Snapshot
  // slots are recycled oldest-first; a block whose snapshot was recycled is simply not a
  // resume point any more.
  int64_t num_state_layers = 0;
  int64_t state_floats = 0;
  int32_t max_sequences = 64;           // live sequences with a working state (hybrid models only)
  int32_t state_snapshot_interval = 1;  // blocks between snapshots
  int32_t num_state_snapshots = 0;      // snapshot slots; 0: one per interval of the pool
  // The states after each of a sequence's last `state_rollback_rows` positions are kept (a
  // ring per sequence), so rolling back that far (`truncate`: rejected drafts of the target or
  // of a draft model) is exact without recomputation. Default: depth k = 5.
  int32_t state_rollback_rows = 6;
  int32_t snapshot_slots() const {
    return num_state_snapshots > 0 ? num_state_snapshots : std::max(1, num_blocks / std::max(1, state_snapshot_interval));
  }
  // Sliding-window layers (Gemma 3, gpt-oss): layer_window[i] is KV layer i's window W (a key k
  // is visible to the query at q iff q − W < k ≤ q), 0 for a full-attention layer; empty: every
  // layer is full. With num_sliding_blocks > 0 and layers of both kinds, the layers split into two
  // groups, each with its own blocks and block table per sequence: the full group (num_blocks
  // blocks, every position kept) and the sliding group (num_sliding_blocks blocks), whose blocks
  // are released once they left every sliding layer's window, so a sequence holds at most
  // sliding_blocks_per_sequence() of them. 0: one group; every layer keeps every block.
  std::vector<int32_t> layer_window;
  int32_t num_sliding_blocks = 0;
  bool is_sliding_layer(int64_t layer) const {
    return static_cast<size_t>(layer) < layer_window.size() && layer_window[static_cast<size_t>(layer)] > 0;
  }
  int64_t num_sliding_layers() const {
    return std::count_if(layer_window.begin(), layer_window.end(), [](int32_t w) { return w > 0; });
  }
  int32_t max_window() const {
    return layer_window.empty() ? 0 : *std::max_element(layer_window.begin(), layer_window.end());
  }
  bool splits_sliding() const {
    return num_sliding_blocks > 0 && num_sliding_layers() > 0 && num_sliding_layers() < num_layers;
  }
  // Layer `layer`'s K/V live in the sliding group's blocks.
  bool in_sliding_group(int64_t layer) const { return splits_sliding() && is_sliding_layer(layer); }
  // The sliding-group blocks one sequence holds at most while a forward computes `chunk` of its
  // tokens: the window behind the chunk's first row, the chunk, a partial block at each end.
  int32_t sliding_blocks_per_sequence(int32_t chunk) const {
    return (max_window() - 1 + chunk + block_size - 1) / block_size + 1;
  }
  kernels::KvFormat storage_format() const { return kernels::kv_storage_format(format, shared_kv); }
  kernels::KvTensorLayout k_layout() const {
    return kernels::kv_tensor_layout(kernels::kv_codec(storage_format(), false), block_size, num_kv_heads, head_dim);
  }
  kernels::KvTensorLayout v_layout() const {
    return kernels::kv_tensor_layout(kernels::kv_codec(storage_format(), true), block_size, num_kv_heads, head_dim);
  }
  // Bytes of K and V per token of one layer, in the storage format (params included).
  double kv_bytes_per_token_layer() const {
    return static_cast<double>(k_layout().block_bytes + (shared_kv ? 0 : v_layout().block_bytes)) / block_size;
  }
  // K/V of one block (every layer of the full group, in the storage format, params and padding
  // included) plus its amortised share of the snapshot pool. With the layers split
  // (splits_sliding), a sliding-group block costs sliding_bytes_per_block() and the sliding pool
  // sliding_pool_bytes(), a fixed amount. The one source of truth for KV bytes.
  size_t bytes_per_block() const {
    const int64_t layers = num_layers - (splits_sliding() ? num_sliding_layers() : 0);
    const int64_t kv = layers * (k_layout().block_bytes + (shared_kv ? 0 : v_layout().block_bytes));
    return static_cast<size_t>(kv) +
           static_cast<size_t>(num_state_layers * state_floats / std::max(1, state_snapshot_interval)) * sizeof(float);
  }
  size_t sliding_bytes_per_block() const {
    if (!splits_sliding()) return 0;
    return static_cast<size_t>(num_sliding_layers() * (k_layout().block_bytes + (shared_kv ? 0 : v_layout().block_bytes)));
  }
  size_t sliding_pool_bytes() const { return static_cast<size_t>(num_sliding_blocks) * sliding_bytes_per_block(); }
};

class KvCache {
 public:
  KvCache(kernels::Backend& backend, const KvLayout& layout);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvLayout& layout() const { return layout_; }
  BlockPool& pool() { return pool_; }  // the full group's (the only one unless layout().splits_sliding())
  const BlockPool& pool() const { return pool_; }
  // The sliding group's blocks (layout().splits_sliding(); else a pool of one unused block).
  const BlockPool& sliding_pool() const { return sliding_pool_; }
  int32_t num_sliding_blocks_in_use() const {
    return layout_.splits_sliding() ? sliding_pool_.num_blocks() - sliding_pool_.num_free() : 0;
  }

  SeqId add_sequence();
  void remove_sequence(SeqId seq);  // releases every block of the sequence
  bool has_sequence(SeqId seq) const;

  // Makes room for positions [0, num_tokens). Returns false (and allocates nothing) when the
  // pools cannot supply the blocks. `first_row`: the forwards to come compute positions from
  // there on, so the sliding group first releases its blocks that no such row's window reaches
  // (even when it then returns false: nothing will read them). A later forward or truncate may
  // not go back before it (StepContext checks).
  bool reserve(SeqId seq, int32_t num_tokens, int32_t first_row = 0);
  // Shortens the sequence to num_tokens positions, releasing blocks no longer needed.
  void truncate(SeqId seq, int32_t num_tokens);
  // Copies the K/V of position `from` to position `to` in every layer, for each (from, to) pair
  // in order, as one backend op (tree verification moves the accepted branch's entries to
  // consecutive positions). All must be reserved and in blocks of this sequence alone (not yet
  // registered for prefix sharing); no `from` may be the `to` of an earlier pair (a branch
  // moving down to consecutive positions never is).
  void copy_positions(SeqId seq, std::span<const std::pair<int32_t, int32_t>> moves);
  // Appends an existing block (a prefix-cache hit, already retained by the caller). Layouts of
  // one group only (a split layout's hit needs a sliding block too: match_prefix).
  void append_block(SeqId seq, BlockId block);

  // Prefix caching. `match_prefix` gives an empty sequence the cached blocks that hold a
  // prefix of `tokens` (whole blocks only, and never the last token, which must be computed
  // to produce logits); returns the number of tokens it now has KV for.
  // `register_blocks` records the hash chain of every full block among the first
  // `num_computed` tokens of the sequence so later requests can share them.
  // With a host or disk tier attached, blocks that miss in the pool are looked up there and
  // loaded when the pool can hold them all and `admit_tokens` more tokens (of the rest) besides:
  // else nothing is loaded (it would only evict other blocks for an admission that cannot take
  // them) and `wait_for_room`, if given, is set: the caller may wait for blocks to free up rather
  // than recompute what the tiers hold.
  // Split layouts: a sliding block is registered under the same hash while the sequence still
  // holds it, and stays cached after its release until the sliding pool reuses it. A prefix hit
  // ends where the sliding group still has every block of the window before it: a hit of P
  // tokens needs the sliding blocks covering positions [P − W + 1, P); shorter hits are tried
  // until one has them.
  int32_t match_prefix(SeqId seq, std::span<const int32_t> tokens, int32_t admit_tokens = INT32_MAX,
                       bool* wait_for_room = nullptr);
  void register_blocks(SeqId seq, std::span<const int32_t> tokens, int32_t num_computed);

  // ---- The host tier of the prefix cache: swap space in host memory.
  // Once attached, every cached block the pool evicts is copied to host memory
  // (Backend::allocate_host: pinned on a GPU; Backend::swap_copy: on a copy stream, ordered
  // against the forwards) into one of max_bytes / host_slot_bytes() slots, the least recently
  // used slot reused first; match_prefix copies a block that misses in the pool back from there
  // into a fresh block (before asking the disk tier). A preempted request's blocks are cached
  // blocks like any other (registered as they are computed), so when it is admitted again its
  // prefix comes back from the pool or from here: only its last partial block is recomputed.
  // Every storage (tensor-parallel ranks, whose replicas the first forward adds: the slots are
  // then cut again to stay within max_bytes) and a hybrid model's state snapshot travel with a
  // block. A split layout (splits_sliding) refuses it, as the disk tier.
  void attach_host_tier(int64_t max_bytes);
  bool has_host_tier() const { return host_index_.has_value(); }
  HostTierStats host_tier_stats() const;
  // One slot: a block of every layer and every storage, and room for a state snapshot.
  size_t host_slot_bytes() const { return storages_.size() * host_storage_bytes(); }

  // ---- The disk tier of the prefix cache (disk_prefix_store.h).
  // Once attached, every cached block the pool evicts is queued for the disk, and match_prefix
  // reads blocks back from it. The store must have been opened with a fingerprint that covers
  // layout_fingerprint(). A split layout (splits_sliding) refuses a disk tier: its blocks are
  // whole-model blocks of one group (the engine keeps every sliding block when it has a tier).
  void attach_disk_tier(std::shared_ptr<DiskPrefixStore> disk);
  DiskPrefixStore* disk_tier() const { return disk_.get(); }
  // Queues every block that holds a prefix-cache hash and is not on disk yet, most recently
  // used first, within the tier's byte budget, and waits until they are written (a server
  // shutting down keeps its cache for the next start). Returns the number of blocks queued.
  int64_t spill_to_disk();
  int64_t num_disk_loaded_blocks() const { return num_disk_loaded_; }
  // What decides the bytes of a block's payload: storage format, shapes, block size, state sizes.
  uint64_t layout_fingerprint() const;
  // A block's bytes as the disk tier stores them: a header word saying whether a recurrent-state
  // snapshot follows, then per storage (one per tensor-parallel rank) each layer's K block then V
  // block in the storage format (params included), then the snapshot of every state layer when the
  // block has a valid one.
  std::vector<std::byte> block_payload(BlockId block) const;
  // Writes a payload of block_payload's shape into `block` (a fresh block of the caller);
  // false when its size does not fit this layout (nothing is then claimed).
  bool restore_block(BlockId block, std::span<const std::byte> payload);

  int32_t num_tokens(SeqId seq) const;
  const std::vector<BlockId>& block_table(SeqId seq) const;
  // The sliding group's table (layout().splits_sliding(); else block_table): kNoBlock where a
  // block left every window and was released.
  const std::vector<BlockId>& sliding_block_table(SeqId seq) const;
  // The first position whose sliding block the sequence still holds (0 without a split).
  int32_t first_sliding_position(SeqId seq) const;
  int32_t blocks_needed(int32_t num_tokens) const { return (num_tokens + layout_.block_size - 1) / layout_.block_size; }

  // Layer `index`'s K/V storage on `backend` (null: the backend the cache was made on).
  kernels::PagedKv layer(int64_t index, const kernels::Backend* backend = nullptr) const;

  // Tensor parallelism: the same blocks and tables, with K/V (and recurrent state) storage on
  // another backend too: each rank keeps its own KV heads, while the sequences, block tables and
  // prefix cache stay one (here). Every storage op (copy_positions, state copies) applies to
  // all storages; forwards read theirs through layer(i, &backend) / state(i, &backend).
  void add_replica(kernels::Backend& backend);
  bool has_storage_on(const kernels::Backend& backend) const {
    return std::any_of(storages_.begin(), storages_.end(), [&](const Storage& s) { return s.backend == &backend; });
  }

  // ---- Recurrent state (layout().num_state_layers > 0).
  bool has_state() const { return layout_.num_state_layers > 0; }
  // A state layer's slots [max_sequences · (1 + state_rollback_rows) + snapshot_slots(),
  // state_floats]: the working slot of sequence s is s, then the sequences' rollback rings,
  // then the block snapshots.
  float* state(int64_t state_layer, const kernels::Backend* backend = nullptr) const {
    return (backend ? storage_on(*backend) : storages_.front()).states.at(state_layer);
  }
  int32_t state_slot(SeqId seq) const;
  // The slot holding (or about to hold, during a forward) the snapshot of `block`, or -1.
  int32_t snapshot_slot(BlockId block) const {
    return block_snapshot_[block] < 0 ? -1 : first_snapshot_slot() + block_snapshot_[block];
  }
  // During a forward prepared by prepare_state: the slot the state after the row at `position`
  // of `seq` is copied to (its rollback ring entry or a block snapshot), or -1.
  int32_t row_state_slot(SeqId seq, int32_t position) const;
  // The largest position <= `position` from which a forward of `seq` can start (always
  // `position` for models without recurrent state).
  int32_t resume_position(SeqId seq, int32_t position) const;
  // Before a forward over positions [position, end) of `seq`: puts the working state at
  // `position` (zero at 0, else restored from a block snapshot) and claims snapshot slots for
  // the snapshot blocks the forward completes. Throws if resume_position(seq, position) != position.
  void prepare_state(SeqId seq, int32_t position, int32_t end);
  // After that forward: the working state is at `end` and the claimed snapshots are valid.
  // prepare_state and commit_state are the only calls that move the state.
  void commit_state(SeqId seq, int32_t position, int32_t end);

 private:
  struct Storage {
    kernels::Backend* backend;
    std::vector<void*> k, v;       // per layer: num_blocks blocks of k_layout() / v_layout()
    std::vector<float*> states;    // per state layer: [first_snapshot_slot() + snapshot_slots, state_floats]
  };
  Storage allocate_storage(kernels::Backend& backend) const;  // all or nothing: a failure frees what it took
  void release_storage(Storage& st) const;
  const Storage& storage_on(const kernels::Backend& backend) const;

  struct Sequence {
    bool live = false;
    int32_t num_tokens = 0;
    std::vector<BlockId> blocks;
    std::vector<BlockHash> hashes;  // chain hashes of the first hashes.size() blocks
    std::vector<BlockId> sliding;   // split layouts: the sliding group's table, as long as blocks
    int32_t sliding_begin = 0;      // ... whose entries before this one are kNoBlock (released)
    int32_t state_position = -1;    // tokens absorbed by the recurrent working state; -1: unknown
    int32_t state_in_flight = -1;   // a forward prepared from this position and not yet committed
    int32_t in_flight_end = 0;      // ... up to this position
    std::vector<BlockId> claimed;   // snapshot blocks claimed by that forward
    int32_t ring_lo = 0, ring_hi = 0;  // the ring holds the states after positions [ring_lo, ring_hi)
    int32_t restore_from = -1;      // the working state must first be restored from this ring position
  };
  bool has_snapshot(BlockId block) const { return block_snapshot_[block] >= 0 && snapshot_valid_[block]; }
  void release_snapshot(BlockId block);
  bool claim_snapshot(BlockId block);
  void release_claims(Sequence& s);
  int32_t first_snapshot_slot() const { return layout_.max_sequences * (1 + layout_.state_rollback_rows); }
  int32_t ring_slot(SeqId seq, int32_t position) const {
    return layout_.max_sequences + seq * layout_.state_rollback_rows + position % layout_.state_rollback_rows;
  }
  void copy_state_slot(int32_t from, int32_t to);
  Sequence& sequence(SeqId seq);
  const Sequence& sequence(SeqId seq) const;
  // The pool evicts a cached block: the host and disk tiers keep its bytes.
  void on_evict(BlockId block, BlockHash hash);
  std::optional<BlockId> load_from_host(BlockHash hash);
  void swap_out(BlockId block, BlockHash hash);
  // The copies between `block` and host slot `slot` of storage `storage`, K/V of every layer and,
  // with `snapshot`, the block's state snapshot.
  void host_copies(size_t storage, BlockId block, int32_t slot, bool snapshot, bool to_host,
                   std::vector<kernels::Backend::DeviceCopy>& copies) const;
  size_t host_storage_bytes() const;
  void resize_host_tier();  // (re)allocates host_tier_bytes_ in slots of host_slot_bytes()
  void free_host_tier();
  std::optional<BlockId> load_from_disk(BlockHash hash);
  void spill_block(BlockId block, BlockHash hash);
  size_t kv_payload_bytes() const;
  void release_sliding_before(Sequence& s, int32_t first_row);
  // The longest prefix of the matched blocks (their chain `hashes`) whose window the sliding
  // pool still holds, in blocks.
  size_t sliding_prefix_blocks(std::span<const BlockHash> hashes) const;

  KvLayout layout_;
  BlockPool pool_;
  BlockPool sliding_pool_;
  std::vector<Sequence> sequences_;
  std::vector<SeqId> free_ids_;
  std::vector<Storage> storages_;  // [0]: on the backend the cache was made on; then replicas
  std::vector<kernels::Backend::DeviceCopy> copies_;  // copy_positions' scratch
  std::vector<int32_t> block_snapshot_;  // per block: its snapshot index, or -1
  std::vector<bool> snapshot_valid_;     // per block: the snapshot is complete
  std::vector<BlockId> snapshot_owner_;  // per snapshot index: the block, or -1
  std::vector<bool> snapshot_claimed_;   // per snapshot index: claimed by a forward in flight
  int32_t next_snapshot_ = 0;            // oldest-first recycling
  int64_t host_tier_bytes_ = 0;
  std::optional<HostBlockIndex> host_index_;
  std::vector<std::byte*> host_memory_;  // per storage: the host tier's slots of its part
  HostTierStats host_stats_;
  std::shared_ptr<DiskPrefixStore> disk_;
  int64_t num_disk_loaded_ = 0;
};

}  // namespace tachyon::kv
