// MTP speculation: the checkpoint's own multi-token-prediction head drafts from the target's
// hidden states (model/mtp_head.h has the math). Depth 1 is what the head was trained for;
// k > 1 drafts recursively, feeding the head's own pre-norm output back as the hidden state
// (MODEL_CARD.md "Recursive use"). Each request keeps an MTP KV sequence whose entries are
// rebuilt from the target's real hidden states after every verification.
#pragma once

#include <memory>

#include "model/mtp_head.h"
#include "spec/drafter.h"

namespace tachyon::spec {

// Drafting scores token ids [0, draft_vocabulary) only (MtpHead::set_draft_vocabulary);
// -1: default_draft_vocabulary (spec/level_drafter.h), 0: all of it.
std::unique_ptr<Drafter> make_mtp_drafter(std::unique_ptr<model::MtpHead> head, kernels::Backend& backend,
                                          int32_t num_blocks = 1024, int32_t block_size = 16,
                                          int64_t draft_vocabulary = -1);

}  // namespace tachyon::spec
