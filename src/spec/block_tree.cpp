#include "spec/block_tree.h"

#include <algorithm>
#include <cmath>
#include <queue>

namespace tachyon::spec {

PositionTopK top_k_log_probs(std::span<const float> logits, int32_t k) {
  PositionTopK out;
  const size_t n = logits.size();
  if (n == 0 || k <= 0) return out;
  float max = -INFINITY;
  for (float x : logits) max = std::max(max, x);
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x - max));
  const float log_z = max + static_cast<float>(std::log(sum));
  std::vector<int32_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>(i);
  const size_t m = std::min(n, static_cast<size_t>(k));
  std::partial_sort(ids.begin(), ids.begin() + static_cast<long>(m), ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (size_t i = 0; i < m; ++i) {
    out.tokens.push_back(ids[i]);
    out.log_probs.push_back(logits[ids[i]] - log_z);
  }
  return out;
}

DraftTree best_first_tree(const std::vector<PositionTopK>& positions, int32_t max_nodes) {
  DraftTree tree;
  struct Candidate {
    double score;      // the prefix's summed log-probability
    int32_t parent;    // tree node it hangs under (0: the root)
    int32_t depth;     // 0-based block position of its last token
    int32_t rank;      // which of that position's top-k
    double parent_score;
    bool operator<(const Candidate& o) const { return score < o.score; }  // max-heap
  };
  std::priority_queue<Candidate> frontier;
  auto push = [&](int32_t parent, double parent_score, int32_t depth, int32_t rank) {
    if (depth >= static_cast<int32_t>(positions.size())) return;
    const PositionTopK& p = positions[static_cast<size_t>(depth)];
    if (rank >= static_cast<int32_t>(p.tokens.size())) return;
    frontier.push({parent_score + p.log_probs[static_cast<size_t>(rank)], parent, depth, rank, parent_score});
  };
  push(0, 0.0, 0, 0);
  while (!frontier.empty() && static_cast<int32_t>(tree.size()) < max_nodes) {
    const Candidate c = frontier.top();
    frontier.pop();
    const int32_t node = tree.add(c.parent, positions[static_cast<size_t>(c.depth)].tokens[static_cast<size_t>(c.rank)]);
    push(node, c.score, c.depth + 1, 0);               // its best child
    push(c.parent, c.parent_score, c.depth, c.rank + 1);  // its next sibling
  }
  return tree;
}

}  // namespace tachyon::spec
