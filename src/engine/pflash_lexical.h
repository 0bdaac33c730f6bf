// PFlash's model-free scorer (Rapid-MLX's, as the seeds describe it): a middle block scores by
// how much of the prompt's end (its last 512 tokens, where the question usually is) it shares,
// each shared token weighted by its rarity (inverse block frequency: a token in every block
// weighs nothing), plus small bonuses for recency and
// for every fourth block (so that what is kept stays spread over the prompt). Sink 256 and
// tail 2048 by default, 128-token blocks. It finds needles that repeat the question's words;
// a paraphrase needs the attention scorer.
#pragma once

#include "engine/pflash.h"

namespace tachyon::engine {

class LexicalScorer final : public PromptScorer {
 public:
  static constexpr int32_t kQueryTokens = 512;
  static constexpr double kRecencyWeight = 0.1, kStrideBonus = 0.05;
  static constexpr int32_t kStride = 4;

  std::string name() const override { return "lexical"; }
  PflashShape default_shape() const override { return {256, 2048, 128}; }
  std::vector<double> score_blocks(std::span<const int32_t> prompt,
                                   std::span<const std::pair<int32_t, int32_t>> blocks) override;
};

}  // namespace tachyon::engine
