#include "spec/draft_tree.h"

#include <algorithm>
#include <cmath>

#include "kernels/backend.h"

namespace tachyon::spec {

bool DraftTree::is_chain() const {
  for (size_t i = 0; i < parents.size(); ++i)
    if (parents[i] != static_cast<int32_t>(i)) return false;
  return true;
}

int32_t DraftTree::depth() const {
  std::vector<int32_t> depth_of(tokens.size() + 1, 0);
  int32_t deepest = 0;
  for (size_t i = 0; i < parents.size(); ++i) deepest = std::max(deepest, depth_of[i + 1] = depth_of[parents[i]] + 1);
  return deepest;
}

int32_t DraftTree::child(int32_t node, int32_t token) const {
  for (size_t i = static_cast<size_t>(node); i < parents.size(); ++i)  // children come after their parent
    if (parents[i] == node && tokens[i] == token) return static_cast<int32_t>(i + 1);
  return -1;
}

int32_t DraftTree::add(int32_t parent, int32_t token) {
  if (const int32_t existing = child(parent, token); existing >= 0) return existing;
  tokens.push_back(token);
  parents.push_back(parent);
  return static_cast<int32_t>(tokens.size());
}

void DraftTree::truncate(size_t num_nodes) {
  tokens.resize(std::min(tokens.size(), num_nodes));
  parents.resize(tokens.size());
  if (node_scores.size() > tokens.size()) node_scores.resize(tokens.size());
}

DraftTree DraftTree::chain(std::vector<int32_t> tokens) {
  DraftTree tree;
  tree.parents.resize(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) tree.parents[i] = static_cast<int32_t>(i);
  tree.tokens = std::move(tokens);
  return tree;
}

LevelChoice level_choice(std::span<const float> logits) {
  return kernels::top_two_of_row(logits.data(), static_cast<int64_t>(logits.size()));
}

DraftTree chain_with_runner_ups(const std::vector<LevelChoice>& levels, int32_t max_nodes) {
  std::vector<int32_t> chain;
  for (const auto& l : levels) chain.push_back(l.best);
  DraftTree tree = DraftTree::chain(chain);
  tree.truncate(static_cast<size_t>(std::max(0, max_nodes)));
  std::vector<std::pair<double, size_t>> order;  // (probability of the runner-up's branch, level)
  double reach = 1.0;
  for (size_t i = 0; i < levels.size() && i < tree.size(); ++i) {
    if (levels[i].second >= 0) order.emplace_back(reach * levels[i].p_second, i);
    reach *= levels[i].p_best;
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [p, level] : order) {
    if (static_cast<int32_t>(tree.size()) >= max_nodes) break;
    tree.add(static_cast<int32_t>(level), levels[level].second);  // chain node `level` is the parent (0: root)
  }
  return tree;
}

VerifyResult verify_tree_greedy(const DraftTree& tree, const std::function<int32_t(int32_t node)>& best) {
  VerifyResult result;
  int32_t node = 0;
  for (;;) {
    const int32_t token = best(node);
    result.tokens.push_back(token);
    const int32_t next = tree.child(node, token);
    if (next < 0) return result;
    result.nodes.push_back(next);
    ++result.num_accepted;
    node = next;
  }
}

VerifyResult verify_tree(const DraftTree& tree, const LogitsRow& row, const sampling::Sampler& sampler,
                         std::span<const int32_t> prompt, std::span<const int32_t> generated,
                         sampling::TokenConstraint* grammar) {
  return verify_walk([&](int32_t node, int32_t token) { return tree.child(node, token); }, true, row, sampler, prompt,
                     generated, grammar);
}

}  // namespace tachyon::spec
