// DFlash speculation: a block drafter (model/dflash_head.h) drafts a whole block of tokens in one
// forward from the target's hidden states at its target_layer_ids, which the target returns
// from the forward it runs anyway (Batch::hidden_layers). Each request keeps the drafter's
// context K/V (one entry per committed position with a hidden state); a proposal appends the
// positions verified since the last one and drafts the block after the last committed token.
//   chain: argmax per block position (k <= block_size - 1 drafts);
//   tree (DDTree, spec/block_tree.h): the best-first tree over each position's top-k log-probs.
#pragma once

#include <memory>

#include "model/dflash_head.h"
#include "spec/drafter.h"

namespace tachyon::spec {

struct DFlashConfig {
  int32_t num_blocks = 1024;  // drafter KV pool (shared by all requests)
  int32_t block_size = 16;
  // Drafting scores token ids [0, draft_vocabulary) only; 0: all of them (the default: one
  // forward drafts the whole block, so the LM head's rows are paid once per block, not once per
  // drafted token as in a level drafter, and the ids past half the vocabulary are tokens the
  // demo model emits in code: cutting them cost 0.33 tokens/step on code completion).
  int64_t draft_vocabulary = 0;
  int32_t tree_top_k = 4;  // DDTree: candidates per block position
};

std::unique_ptr<Drafter> make_dflash_drafter(std::unique_ptr<model::DFlashHead> head, kernels::Backend& backend,
                                             const DFlashConfig& config = {});

}  // namespace tachyon::spec
