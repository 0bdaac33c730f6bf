// Prompt lookup decoding (PLD): the draft is what followed the most recent earlier
// occurrence of the context's last n tokens (n from max_n down to min_n), a pure function
// over token ids. Model-agnostic; pays off when outputs copy from the prompt (code edits,
// RAG, agents repeating tool-call JSON).
#pragma once

#include "spec/drafter.h"

namespace tachyon::spec {

struct NgramConfig {
  int32_t min_n = 2;
  int32_t max_n = 4;
  int32_t max_lookback = 1 << 16;  // tokens searched backwards at most
};

// The proposal itself (exposed for tests).
std::vector<int32_t> ngram_propose(std::span<const int32_t> tokens, int32_t k, const NgramConfig& config);

// The tree version: the continuations of several earlier occurrences (longest n first, most
// recent first), merged into one tree of at most max_nodes nodes. Its first branch is
// ngram_propose's chain, so the tree accepts at least what the chain would.
DraftTree ngram_propose_tree(std::span<const int32_t> tokens, int32_t max_depth, int32_t max_nodes,
                             const NgramConfig& config);

// Repetition score of a prompt: the fraction of its 3-grams that occurred earlier in it.
// Model-free drafters stay off on novel text (score below a threshold).
double trigram_repetition(std::span<const int32_t> tokens);

std::unique_ptr<Drafter> make_ngram_drafter(const NgramConfig& config);

}  // namespace tachyon::spec
