#include "engine/pflash_lexical.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

namespace tachyon::engine {

std::vector<double> LexicalScorer::score_blocks(std::span<const int32_t> prompt,
                                                std::span<const std::pair<int32_t, int32_t>> blocks) {
  const size_t n = prompt.size();
  // Each block's distinct tokens, and in how many blocks each token occurs.
  std::vector<std::unordered_set<int32_t>> block_tokens(blocks.size());
  std::unordered_map<int32_t, int32_t> blocks_with;
  for (size_t b = 0; b < blocks.size(); ++b) {
    for (int32_t i = blocks[b].first; i < blocks[b].second; ++i) block_tokens[b].insert(prompt[static_cast<size_t>(i)]);
    for (int32_t t : block_tokens[b]) ++blocks_with[t];
  }
  // Rarity (inverse block frequency): a token in one block weighs most, one in every block nothing.
  const double num_blocks = static_cast<double>(blocks.size());
  auto rarity = [&](int32_t t) {
    auto it = blocks_with.find(t);
    return std::log((num_blocks + 1.0) / ((it == blocks_with.end() ? 0 : it->second) + 1.0));
  };
  const size_t query_begin = n > static_cast<size_t>(kQueryTokens) ? n - kQueryTokens : 0;
  const std::unordered_set<int32_t> query(prompt.begin() + static_cast<long>(query_begin), prompt.end());
  double query_weight = 0;
  for (int32_t t : query) query_weight += rarity(t);
  std::vector<double> scores;
  scores.reserve(blocks.size());
  for (size_t b = 0; b < blocks.size(); ++b) {
    double overlap = 0;
    for (int32_t t : block_tokens[b])
      if (query.count(t)) overlap += rarity(t);
    const double recency = static_cast<double>(b + 1) / num_blocks;
    const double stride = b % kStride == 0 ? kStrideBonus : 0.0;
    scores.push_back((query_weight > 0 ? overlap / query_weight : 0.0) + kRecencyWeight * recency + stride);
  }
  return scores;
}

}  // namespace tachyon::engine
