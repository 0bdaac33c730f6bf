#include "spec/suffix.h"

#include <algorithm>
#include <queue>

namespace tachyon::spec {

void SuffixTrie::add(std::span<const int32_t> tokens, int32_t delta) {
  for (size_t start = 0; start < tokens.size(); ++start) {
    int32_t node = 0;
    const size_t end = std::min(tokens.size(), start + static_cast<size_t>(max_depth_));
    for (size_t i = start; i < end; ++i) {
      auto it = nodes_[node].children.find(tokens[i]);
      int32_t child;
      if (it == nodes_[node].children.end()) {
        if (delta < 0) break;  // removing something never added
        child = new_node();
        nodes_[node].children.emplace(tokens[i], child);
      } else {
        child = it->second;
      }
      nodes_[child].count += delta;
      if (nodes_[child].count <= 0) {
        // Every stored suffix through a node passes through its parent, so a count never exceeds
        // the parent's: with none left here, its whole subtree is empty too.
        nodes_[node].children.erase(tokens[i]);
        release(child);
        break;
      }
      node = child;
    }
  }
}

int32_t SuffixTrie::new_node() {
  if (!free_.empty()) {
    const int32_t n = free_.back();
    free_.pop_back();
    return n;
  }
  nodes_.emplace_back();
  return static_cast<int32_t>(nodes_.size() - 1);
}

void SuffixTrie::release(int32_t subtree) {
  std::vector<int32_t> pending = {subtree};
  while (!pending.empty()) {
    const int32_t n = pending.back();
    pending.pop_back();
    for (const auto& [token, child] : nodes_[n].children) pending.push_back(child);
    nodes_[n] = Node{};  // gives the children map's memory back
    free_.push_back(n);
  }
}

int32_t SuffixTrie::find(std::span<const int32_t> path) const {
  int32_t node = 0;
  for (int32_t t : path) {
    auto it = nodes_[node].children.find(t);
    if (it == nodes_[node].children.end() || nodes_[it->second].count <= 0) return -1;
    node = it->second;
  }
  return node;
}

std::pair<int32_t, std::vector<int32_t>> SuffixTrie::propose(std::span<const int32_t> context, int32_t k,
                                                             int32_t min_match) const {
  const int32_t longest = std::min<int32_t>(static_cast<int32_t>(context.size()), max_depth_ - 1);
  for (int32_t m = longest; m >= min_match; --m) {
    int32_t node = find(context.subspan(context.size() - static_cast<size_t>(m)));
    if (node < 0) continue;
    std::vector<int32_t> draft;
    for (int32_t depth = m; static_cast<int32_t>(draft.size()) < k && depth < max_depth_; ++depth) {
      int32_t best_token = -1, best_node = -1;
      int64_t best_count = 0;
      for (const auto& [token, child] : nodes_[node].children)
        if (nodes_[child].count > best_count || (nodes_[child].count == best_count && best_count > 0 && token < best_token))
          best_count = nodes_[child].count, best_token = token, best_node = child;
      if (best_node < 0) break;
      draft.push_back(best_token);
      node = best_node;
    }
    if (!draft.empty()) return {m, draft};
  }
  return {0, {}};
}

int32_t SuffixTrie::longest_match(std::span<const int32_t> context, int32_t min_match, int32_t& length) const {
  const int32_t longest = std::min<int32_t>(static_cast<int32_t>(context.size()), max_depth_ - 1);
  for (int32_t m = longest; m >= min_match; --m) {
    const int32_t node = find(context.subspan(context.size() - static_cast<size_t>(m)));
    if (node >= 0 && !nodes_[node].children.empty()) {
      length = m;
      return node;
    }
  }
  length = 0;
  return -1;
}

std::pair<int32_t, DraftTree> SuffixTrie::propose_tree(std::span<const int32_t> context, int32_t max_depth,
                                                       int32_t max_nodes, int32_t min_match) const {
  int32_t m = 0;
  const int32_t start = longest_match(context, min_match, m);
  DraftTree tree;
  if (start < 0) return {0, tree};
  struct Frontier {
    double p;
    int32_t token, trie_node, tree_parent, depth;
    // Most probable first; ties by token so the tree does not depend on hash-map order.
    bool operator<(const Frontier& o) const { return p != o.p ? p < o.p : token > o.token; }
  };
  std::priority_queue<Frontier> frontier;
  auto expand = [&](int32_t trie_node, int32_t tree_node, int32_t depth, double p) {
    if (depth >= max_depth || m + depth >= max_depth_) return;
    int64_t total = 0;
    for (const auto& [token, child] : nodes_[trie_node].children) total += std::max<int64_t>(0, nodes_[child].count);
    for (const auto& [token, child] : nodes_[trie_node].children)
      if (nodes_[child].count > 0)
        frontier.push({p * static_cast<double>(nodes_[child].count) / static_cast<double>(total), token, child,
                       tree_node, depth});
  };
  expand(start, 0, 0, 1.0);
  while (!frontier.empty() && static_cast<int32_t>(tree.size()) < max_nodes) {
    const Frontier f = frontier.top();
    frontier.pop();
    expand(f.trie_node, tree.add(f.tree_parent, f.token), f.depth + 1, f.p);
  }
  return {m, tree};
}

namespace {

class SuffixDrafter final : public Drafter {
 public:
  explicit SuffixDrafter(const SuffixConfig& c) : config_(c), global_(c.max_depth) {}
  std::string name() const override { return "suffix"; }

  std::vector<int32_t> propose(RequestKey request, std::span<const int32_t> tokens, int32_t k) override {
    std::lock_guard lock(mutex_);
    Request& r = index(request, tokens);
    auto local = r.local.propose(tokens, k, config_.min_match);
    auto global = global_.propose(tokens, k, config_.min_match);
    return global.first > local.first ? global.second : local.second;
  }

  DraftTree propose_tree(RequestKey request, std::span<const int32_t> tokens, int32_t max_depth,
                         int32_t max_nodes) override {
    std::lock_guard lock(mutex_);
    Request& r = index(request, tokens);
    auto local = r.local.propose_tree(tokens, max_depth, max_nodes, config_.min_match);
    auto global = global_.propose_tree(tokens, max_depth, max_nodes, config_.min_match);
    return global.first > local.first ? global.second : local.second;
  }
  bool proposes_trees() const override { return true; }

  void on_finish(RequestKey request, std::span<const int32_t> tokens, int32_t num_prompt) override {
    std::lock_guard lock(mutex_);
    requests_.erase(request);
    const auto output = tokens.subspan(static_cast<size_t>(std::min<int32_t>(num_prompt, static_cast<int32_t>(tokens.size()))));
    if (output.empty()) return;
    global_.add(output);
    history_.emplace_back(output.begin(), output.end());
    stored_ += static_cast<int64_t>(output.size());
    while (stored_ > config_.max_global_tokens && !history_.empty()) {  // bounded memory: evict the oldest
      global_.add(history_.front(), -1);
      stored_ -= static_cast<int64_t>(history_.front().size());
      history_.pop_front();
    }
  }

 private:
  struct Request {
    SuffixTrie local;
    int32_t prompt_length;
    int32_t indexed;
  };
  // The request's own trie, created over its prompt at the first call and extended with its
  // generated tokens as they come.
  Request& index(RequestKey request, std::span<const int32_t> tokens) {
    auto it = requests_.find(request);
    if (it == requests_.end()) {  // first call: the prompt is everything but the last token
      it = requests_.emplace(request, Request{SuffixTrie(config_.max_depth), static_cast<int32_t>(tokens.size()) - 1, 0}).first;
      it->second.local.add(tokens.first(tokens.size() - 1));
      it->second.indexed = static_cast<int32_t>(tokens.size()) - 1;
    }
    Request& r = it->second;
    // Index this request's own new tokens too (generated text repeats itself).
    if (static_cast<int32_t>(tokens.size()) > r.indexed + config_.max_depth) {
      r.local.add(tokens.subspan(static_cast<size_t>(r.indexed), tokens.size() - static_cast<size_t>(r.indexed)));
      r.indexed = static_cast<int32_t>(tokens.size());
    }
    return r;
  }


  SuffixConfig config_;
  std::mutex mutex_;
  SuffixTrie global_;
  std::deque<std::vector<int32_t>> history_;
  int64_t stored_ = 0;
  std::unordered_map<RequestKey, Request> requests_;
};

}  // namespace

std::unique_ptr<Drafter> make_suffix_drafter(const SuffixConfig& config) { return std::make_unique<SuffixDrafter>(config); }

}  // namespace tachyon::spec
