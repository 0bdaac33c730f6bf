// Tensor parallelism's sharding plan: which slice of which tensor each rank of a group holds,
// and the configuration each rank's model is built from.
//
// Megatron-style, one all-reduce per sub-block: q/k/v and gate/up are split by output rows
// (column-parallel: each rank computes its heads' q/k/v and its slice of the intermediate
// features), o_proj and down_proj by input columns (row-parallel: each rank's product is a
// partial sum, which DecoderLayer adds across the ranks with Backend::all_reduce_sum). A rank's
// model is then the unsharded architecture with num_attention_heads, num_key_value_heads and
// intermediate_size divided by the group size: its KV cache holds its KV heads only. Norms,
// embeddings and the LM head are replicated (each rank computes the full logits, so the engine
// above sees one model); an o_proj/down_proj bias is added by rank 0 alone.
//
//   ShardPlan plan = plan_tensor_parallel(config, 2);     // throws naming what does not divide
//   plan.kind_of("model.layers.0.self_attn.o_proj.weight");   // ShardKind::Cols
//   LoadOptions o; o.shard = &plan; o.rank = 1;  load_model(dir, backend1, o);
//
// Supported: decoder models whose layers are all plain attention + gated MLP (llama, mistral,
// qwen2, qwen3, gemma3); MoE, MLA, linear attention, attention sinks and output gates are
// refused by name until their sharding exists.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "io/config.h"

namespace tachyon::model {

enum class ShardKind {
  Replicate,  // every rank holds the whole tensor
  Rows,       // split along dim 0 (a 1-D tensor: its elements)
  Cols,       // split along dim 1
  FirstRank,  // rank 0 holds it, the others hold zeros (a row-parallel projection's bias)
};
const char* shard_kind_name(ShardKind kind);

struct ShardPlan {
  int world = 1;
  io::ModelConfig rank_config;  // what each rank's model is built from

  ShardKind kind_of(const std::string& tensor) const;
  // Rank `rank`'s range [begin, end) of a dimension of `extent` elements (even split).
  static std::pair<int64_t, int64_t> range(int64_t extent, int world, int rank) {
    return {extent / world * rank, extent / world * (rank + 1)};
  }
};

// Throws tachyon::Error naming the first thing that prevents a split into `world` ranks.
ShardPlan plan_tensor_parallel(const io::ModelConfig& config, int world);

}  // namespace tachyon::model
