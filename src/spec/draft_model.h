// Draft-model speculation: a small companion model (same tokenizer) proposes k tokens
// greedily. It keeps its own paged KV per request, in sync with the committed tokens: on each
// proposal it rolls back the drafts the target rejected, catches up on the tokens it has not
// seen (one forward), then drafts one token per forward.
#pragma once

#include <string>

#include "kernels/backend.h"
#include "model/model.h"
#include "spec/drafter.h"

namespace tachyon::spec {

struct DraftModelConfig {
  int32_t num_blocks = 1024;  // drafter KV pool (shared by all requests)
  int32_t block_size = 16;
  // Drafting scores token ids [0, draft_vocabulary) only (Model::set_draft_vocabulary);
  // -1: default_draft_vocabulary (spec/level_drafter.h), 0: all of them.
  int64_t draft_vocabulary = -1;
  // false: the drafter's matrices are loaded in draft precision (kernels::DraftWeights; int8 on
  // the CPU). true: as the checkpoint stores them.
  bool exact_weights = false;
};

// Loads `drafter_dir` (fail closed like any model) and checks that it can draft for the
// target: same vocabulary size, and identical tokenizer.json when the drafter ships one.
// Throws tachyon::Error naming the mismatch.
std::unique_ptr<Drafter> make_draft_model_drafter(const std::string& drafter_dir, const std::string& target_dir,
                                                  const model::Model& target, kernels::Backend& backend,
                                                  const DraftModelConfig& config = {});

}  // namespace tachyon::spec
