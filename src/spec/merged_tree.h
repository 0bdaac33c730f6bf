// One draft tree from several drafters' candidates (issue #48 item 4, "a merged tree of several"):
// their trees merged into one prefix tree (a prefix two drafters share is one node, where they
// differ the tree branches), each node scored by how likely the target accepts it, and pruned to
// the node count whose expected tokens per second of measured verify cost is best.
//
// A node's score is the probability that the target's greedy path reaches it: its parent's score
// times its own acceptance given the parent, 1 − Π(1 − rate) over the drafters that proposed it,
// where a drafter's rate is what it measured at that depth for that line (its first child under a
// parent, its main line, or a later one: prompt lookup's older occurrences, a model drafter's
// runner-up leaves) on this kind of request. Siblings exclude each other (at most one is the
// target's token), so their acceptances are scaled to sum to at most 1. A score never exceeds its
// parent's, so the best n nodes always form a tree (ties keep the parent, which comes first).
//
//   SourcedTree merged;
//   merge_into(merged, ngram_tree, /*member=*/0);
//   merge_into(merged, draft_tree, /*member=*/1);
//   auto scores = score_nodes(merged, figures);
//   int32_t n = best_node_count(scores, [&](int32_t n) { return costs.cost(n); });
//   SourcedTree verified = keep_best(merged, scores, n);
//   ... the target verifies verified.tree; its next tokens are `actual` ...
//   record_outcome(verified, actual, figures);
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "spec/draft_tree.h"

namespace tachyon::spec {

inline constexpr int32_t kMaxMergedMembers = 8;

// A draft tree whose nodes know which drafters proposed them (bit m: member m).
struct SourcedTree {
  DraftTree tree;
  std::vector<uint32_t> main_line;  // per node: the members whose first child under its parent it is
  std::vector<uint32_t> side_line;  // ... and those that proposed it as a later child
  uint32_t sources(size_t node_index) const { return main_line[node_index] | side_line[node_index]; }
  // The members with at least one node in the tree.
  uint32_t members() const;
};

// Adds member `member`'s tree (spec/draft_tree.h: parents before children) to `merged`.
void merge_into(SourcedTree& merged, const DraftTree& tree, int32_t member);

// Per member, line (0 main, 1 side) and depth: how often a node was reached (its parent was on the
// target's path) and accepted (it was the target's token there). Counts decay (halved past
// kWindow reached) so the rates follow the text.
class MergedFigures {
 public:
  static constexpr int32_t kMaxDepth = 16;
  static constexpr double kWindow = 256;
  // Before a rate is measured it is this prior, weighted as kPriorWeight observations.
  static constexpr double kPriorMain = 0.5, kPriorSide = 0.1, kPriorWeight = 4;

  double rate(int32_t member, int32_t line, int32_t depth) const;
  void record(int32_t member, int32_t line, int32_t depth, bool accepted);
  double reached(int32_t member, int32_t line, int32_t depth) const { return at(member, line, depth).reached; }

 private:
  struct Count {
    double reached = 0, accepted = 0;
  };
  const Count& at(int32_t member, int32_t line, int32_t depth) const;
  std::array<Count, kMaxMergedMembers * 2 * kMaxDepth> counts_{};
};

// Each node's probability of being on the target's path (node i: scores[i], depth from 1).
std::vector<double> score_nodes(const SourcedTree& tree, const MergedFigures& figures);

// The node count n in [0, scores.size()] with the most expected tokens per second:
// (1 + the n best scores) / step_seconds(n). step_seconds(0) is a plain step; a step_seconds that
// returns 0 (nothing measured) keeps every node.
int32_t best_node_count(const std::vector<double>& scores, const std::function<double(int32_t)>& step_seconds);
// The same over prefixes of `values` in their own order: the n whose first n values, added to the
// target's own token, give the most tokens per step_seconds(n) (a scored tree's nodes, whose
// prefixes are trees: DraftTree::node_scores).
int32_t best_prefix_count(const std::vector<double>& values, const std::function<double(int32_t)>& step_seconds);

// The `n` best-scored nodes (a tree: see above), in their original order.
SourcedTree keep_best(const SourcedTree& tree, const std::vector<double>& scores, int32_t n);

// What the target did with a verified tree: `actual` holds the tokens it committed after the
// root (accepted drafts, its own next token, anything later). Records every reached node's
// outcome in `figures`.
void record_outcome(const SourcedTree& tree, std::span<const int32_t> actual, MergedFigures& figures);

// How many nodes of the target's path (`actual`, as above) the tree held, following only nodes
// proposed by one of `members` (a member's gain: the depth with every member less the depth
// without it).
int32_t accepted_depth(const SourcedTree& tree, std::span<const int32_t> actual, uint32_t members = ~0u);

}  // namespace tachyon::spec
