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

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "kv/block_pool.h"

namespace tachyon::kv {

using SeqId = int32_t;

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
  size_t bytes_per_block() const {
    return static_cast<size_t>((shared_kv ? 1 : 2) * num_layers * block_size * num_kv_heads * head_dim) * sizeof(float);
  }
};

class KvCache {
 public:
  KvCache(kernels::Backend& backend, const KvLayout& layout);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvLayout& layout() const { return layout_; }
  BlockPool& pool() { return pool_; }

  SeqId add_sequence();
  void remove_sequence(SeqId seq);  // releases every block of the sequence
  bool has_sequence(SeqId seq) const;

  // Makes room for positions [0, num_tokens). Returns false (and changes nothing) when the
  // pool cannot supply the blocks.
  bool reserve(SeqId seq, int32_t num_tokens);
  // Shortens the sequence to num_tokens positions, releasing blocks no longer needed.
  void truncate(SeqId seq, int32_t num_tokens);
  // Appends an existing block (a prefix-cache hit, already retained by the caller).
  void append_block(SeqId seq, BlockId block);

  // Prefix caching. `match_prefix` gives an empty sequence the cached blocks that hold a
  // prefix of `tokens` (whole blocks only, and never the last token, which must be computed
  // to produce logits); returns the number of tokens it now has KV for.
  // `register_blocks` records the hash chain of every full block among the first
  // `num_computed` tokens of the sequence so later requests can share them.
  int32_t match_prefix(SeqId seq, std::span<const int32_t> tokens);
  void register_blocks(SeqId seq, std::span<const int32_t> tokens, int32_t num_computed);

  int32_t num_tokens(SeqId seq) const;
  const std::vector<BlockId>& block_table(SeqId seq) const;
  int32_t blocks_needed(int32_t num_tokens) const { return (num_tokens + layout_.block_size - 1) / layout_.block_size; }

  kernels::PagedKv layer(int64_t index) const;

 private:
  struct Sequence {
    bool live = false;
    int32_t num_tokens = 0;
    std::vector<BlockId> blocks;
    std::vector<BlockHash> hashes;  // chain hashes of the first hashes.size() blocks
  };
  Sequence& sequence(SeqId seq);
  const Sequence& sequence(SeqId seq) const;

  kernels::Backend& backend_;
  KvLayout layout_;
  BlockPool pool_;
  std::vector<Sequence> sequences_;
  std::vector<SeqId> free_ids_;
  std::vector<float*> k_, v_;  // per layer: [num_blocks, block_size, num_kv_heads, head_dim]
};

}  // namespace tachyon::kv
