#include "kv/kv_cache.h"

#include <algorithm>

#include "base/error.h"
#include "kv/prefix_hash.h"

namespace tachyon::kv {

KvCache::KvCache(kernels::Backend& backend, const KvLayout& layout)
    : backend_(backend), layout_(layout), pool_(layout.num_blocks) {
  TACHYON_CHECK(layout.block_size > 0 && layout.num_layers > 0, "invalid KV layout");
  const size_t layer_bytes =
      static_cast<size_t>(layout.num_blocks) * layout.block_size * layout.num_kv_heads * layout.head_dim * sizeof(float);
  for (int64_t l = 0; l < layout.num_layers; ++l) {
    k_.push_back(static_cast<float*>(backend_.allocate(layer_bytes)));
    v_.push_back(layout.shared_kv ? k_.back() : static_cast<float*>(backend_.allocate(layer_bytes)));
  }
}

KvCache::~KvCache() {
  for (float* p : k_) backend_.deallocate(p);
  if (!layout_.shared_kv)
    for (float* p : v_) backend_.deallocate(p);
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
  sequences_[id] = Sequence{true, 0, {}, {}};
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
  for (BlockId b : s.blocks) pool_.release(b);
  s = Sequence{};
  free_ids_.push_back(seq);
}

bool KvCache::reserve(SeqId seq, int32_t num_tokens) {
  Sequence& s = sequence(seq);
  const int32_t need = blocks_needed(num_tokens) - static_cast<int32_t>(s.blocks.size());
  if (need > 0) {
    if (need > pool_.num_free()) return false;
    for (int32_t i = 0; i < need; ++i) s.blocks.push_back(*pool_.allocate());
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
  // A block that is no longer full is no longer the block its hash names.
  s.hashes.resize(std::min(s.hashes.size(), static_cast<size_t>(num_tokens / layout_.block_size)));
  s.num_tokens = num_tokens;
}

void KvCache::append_block(SeqId seq, BlockId block) {
  Sequence& s = sequence(seq);
  TACHYON_CHECK(s.num_tokens == static_cast<int32_t>(s.blocks.size()) * layout_.block_size,
                "append_block needs a sequence that ends on a block boundary");
  s.blocks.push_back(block);
  s.num_tokens += layout_.block_size;
}

int32_t KvCache::match_prefix(SeqId seq, std::span<const int32_t> tokens) {
  Sequence& s = sequence(seq);
  TACHYON_CHECK(s.num_tokens == 0, "match_prefix needs an empty sequence");
  const int32_t bs = layout_.block_size;
  const size_t max_blocks = tokens.empty() ? 0 : (tokens.size() - 1) / static_cast<size_t>(bs);
  BlockHash parent = kRootHash;
  for (size_t b = 0; b < max_blocks; ++b) {
    const BlockHash h = hash_block(parent, tokens.subspan(b * bs, static_cast<size_t>(bs)));
    const auto hit = pool_.find_cached(h);
    if (!hit) break;
    s.blocks.push_back(*hit);
    s.hashes.push_back(h);
    s.num_tokens += bs;
    parent = h;
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
    s.hashes.push_back(h);
  }
}

int32_t KvCache::num_tokens(SeqId seq) const { return sequence(seq).num_tokens; }
const std::vector<BlockId>& KvCache::block_table(SeqId seq) const { return sequence(seq).blocks; }

kernels::PagedKv KvCache::layer(int64_t index) const {
  return {k_.at(index), v_.at(index), layout_.block_size, layout_.num_kv_heads, layout_.head_dim};
}

}  // namespace tachyon::kv
