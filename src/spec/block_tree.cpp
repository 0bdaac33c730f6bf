#include "spec/block_tree.h"

#include <algorithm>
#include <cmath>
#include <queue>

namespace tachyon::spec {

PositionTopK top_k_log_probs(std::span<const float> logits, int32_t k) {
  // One pass for the top k (a later equal logit never displaces an earlier one: ties go to the
  // lower id; NaN is never a candidate), then the log-partition in float over 16 lanes. A DFlash
  // block drafts 7 positions over the whole vocabulary: a double exp per logit and a partial sort
  // of all ids took longer than the drafter's forward.
  PositionTopK out;
  const size_t n = logits.size();
  if (n == 0 || k <= 0) return out;
  const size_t m = std::min(n, static_cast<size_t>(k));
  std::vector<int32_t> ids;
  ids.reserve(m + 1);
  for (size_t i = 0; i < n; ++i) {
    const float x = logits[i];
    if (x != x || (ids.size() == m && !(x > logits[static_cast<size_t>(ids.back())]))) continue;
    size_t at = ids.size();
    while (at > 0 && x > logits[static_cast<size_t>(ids[at - 1])]) --at;
    ids.insert(ids.begin() + static_cast<long>(at), static_cast<int32_t>(i));
    if (ids.size() > m) ids.pop_back();
  }
  if (ids.empty()) return out;
  const float max = logits[static_cast<size_t>(ids.front())];
  constexpr size_t kLanes = 16;
  float lanes[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t l = 0; l < kLanes; ++l) lanes[l] += std::exp(logits[i + l] - max);
  float sum = 0.f;
  for (const float l : lanes) sum += l;
  for (; i < n; ++i) sum += std::exp(logits[i] - max);
  const float log_z = max + std::log(sum);
  for (const int32_t id : ids) {
    out.tokens.push_back(id);
    out.log_probs.push_back(logits[static_cast<size_t>(id)] - log_z);
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
    tree.node_scores.push_back(std::exp(c.score));  // popped best first: non-increasing
    push(node, c.score, c.depth + 1, 0);               // its best child
    push(c.parent, c.parent_score, c.depth, c.rank + 1);  // its next sibling
  }
  return tree;
}

}  // namespace tachyon::spec
