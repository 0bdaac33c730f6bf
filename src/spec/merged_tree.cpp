#include "spec/merged_tree.h"

#include <algorithm>
#include <numeric>

#include "base/error.h"

namespace tachyon::spec {

uint32_t SourcedTree::members() const {
  uint32_t all = 0;
  for (size_t i = 0; i < main_line.size(); ++i) all |= sources(i);
  return all;
}

void merge_into(SourcedTree& merged, const DraftTree& tree, int32_t member) {
  TACHYON_CHECK(member >= 0 && member < kMaxMergedMembers, "merged tree member {}", member);
  const uint32_t bit = 1u << member;
  std::vector<int32_t> node_in_merged(tree.size() + 1, 0);  // [the member's node] -> merged node
  std::vector<bool> has_child(tree.size() + 1, false);
  for (size_t i = 0; i < tree.size(); ++i) {
    const int32_t parent = tree.parents[i];
    const int32_t node = merged.tree.add(node_in_merged[static_cast<size_t>(parent)], tree.tokens[i]);
    if (merged.main_line.size() < merged.tree.size()) {
      merged.main_line.push_back(0);
      merged.side_line.push_back(0);
    }
    const size_t at = static_cast<size_t>(node - 1);
    (has_child[static_cast<size_t>(parent)] ? merged.side_line : merged.main_line)[at] |= bit;
    has_child[static_cast<size_t>(parent)] = true;
    node_in_merged[i + 1] = node;
  }
}

const MergedFigures::Count& MergedFigures::at(int32_t member, int32_t line, int32_t depth) const {
  const int32_t d = std::clamp(depth, 1, kMaxDepth) - 1;
  return counts_[static_cast<size_t>((member * 2 + line) * kMaxDepth + d)];
}

double MergedFigures::rate(int32_t member, int32_t line, int32_t depth) const {
  const Count& c = at(member, line, depth);
  const double prior = line == 0 ? kPriorMain : kPriorSide;
  return (c.accepted + prior * kPriorWeight) / (c.reached + kPriorWeight);
}

void MergedFigures::record(int32_t member, int32_t line, int32_t depth, bool accepted) {
  Count& c = const_cast<Count&>(at(member, line, depth));
  if (c.reached >= kWindow) c.reached /= 2, c.accepted /= 2;
  c.reached += 1;
  c.accepted += accepted ? 1 : 0;
}

namespace {
template <typename Visit>
void for_each_member(uint32_t mask, Visit visit) {
  for (int32_t m = 0; m < kMaxMergedMembers; ++m)
    if (mask & (1u << m)) visit(m);
}
}  // namespace

std::vector<double> score_nodes(const SourcedTree& t, const MergedFigures& figures) {
  const size_t n = t.tree.size();
  std::vector<int32_t> depth(n + 1, 0);
  std::vector<double> own(n), siblings(n + 1, 0.0), reach(n + 1, 1.0);
  for (size_t i = 0; i < n; ++i) {
    const auto parent = static_cast<size_t>(t.tree.parents[i]);
    depth[i + 1] = depth[parent] + 1;
    double miss = 1.0;  // every proposer wrong
    for_each_member(t.main_line[i], [&](int32_t m) { miss *= 1 - figures.rate(m, 0, depth[i + 1]); });
    for_each_member(t.side_line[i], [&](int32_t m) { miss *= 1 - figures.rate(m, 1, depth[i + 1]); });
    own[i] = 1 - miss;
    siblings[parent] += own[i];
  }
  std::vector<double> scores(n);
  for (size_t i = 0; i < n; ++i) {
    const auto parent = static_cast<size_t>(t.tree.parents[i]);
    scores[i] = reach[i + 1] = reach[parent] * own[i] / std::max(1.0, siblings[parent]);
  }
  return scores;
}

int32_t best_node_count(const std::vector<double>& scores, const std::function<double(int32_t)>& step_seconds) {
  std::vector<double> sorted = scores;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  return best_prefix_count(sorted, step_seconds);
}

int32_t best_prefix_count(const std::vector<double>& values, const std::function<double(int32_t)>& step_seconds) {
  const auto all = static_cast<int32_t>(values.size());
  int32_t best = 0;
  double best_rate = 0, expected = 1;  // tokens of a step: the target's own one plus accepted nodes
  for (int32_t n = 0; n <= all; ++n) {
    if (n > 0) expected += values[static_cast<size_t>(n - 1)];
    const double seconds = step_seconds(n);
    if (seconds <= 0) return all;  // not measured yet: verify everything once
    if (expected / seconds > best_rate) best = n, best_rate = expected / seconds;
  }
  return best;
}

SourcedTree keep_best(const SourcedTree& t, const std::vector<double>& scores, int32_t n) {
  const size_t size = t.tree.size();
  std::vector<size_t> order(size);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  std::vector<bool> keep(size + 1, false);
  keep[0] = true;  // the root
  for (size_t r = 0; r < std::min(size, static_cast<size_t>(std::max(0, n))); ++r) keep[order[r] + 1] = true;
  SourcedTree out;
  std::vector<int32_t> renumbered(size + 1, 0);
  for (size_t i = 0; i < size; ++i) {
    const auto parent = static_cast<size_t>(t.tree.parents[i]);
    if (!keep[i + 1] || !keep[parent]) {  // a parent is never scored below its child; kept whole regardless
      keep[i + 1] = false;
      continue;
    }
    out.tree.tokens.push_back(t.tree.tokens[i]);
    out.tree.parents.push_back(renumbered[parent]);
    out.main_line.push_back(t.main_line[i]);
    out.side_line.push_back(t.side_line[i]);
    renumbered[i + 1] = static_cast<int32_t>(out.tree.size());
  }
  return out;
}

void record_outcome(const SourcedTree& t, std::span<const int32_t> actual, MergedFigures& figures) {
  int32_t node = 0;
  for (size_t d = 0; d < actual.size(); ++d) {
    int32_t next = -1;
    for (size_t i = static_cast<size_t>(node); i < t.tree.size(); ++i) {
      if (t.tree.parents[i] != node) continue;
      const bool accepted = t.tree.tokens[i] == actual[d];
      const auto depth = static_cast<int32_t>(d + 1);
      for_each_member(t.main_line[i], [&](int32_t m) { figures.record(m, 0, depth, accepted); });
      for_each_member(t.side_line[i], [&](int32_t m) { figures.record(m, 1, depth, accepted); });
      if (accepted) next = static_cast<int32_t>(i + 1);
    }
    if (next < 0) return;
    node = next;
  }
}

int32_t accepted_depth(const SourcedTree& t, std::span<const int32_t> actual, uint32_t members) {
  int32_t node = 0, depth = 0;
  for (size_t d = 0; d < actual.size(); ++d) {
    const int32_t next = t.tree.child(node, actual[d]);
    if (next < 0 || !(t.sources(static_cast<size_t>(next - 1)) & members)) break;
    node = next;
    ++depth;
  }
  return depth;
}

}  // namespace tachyon::spec
