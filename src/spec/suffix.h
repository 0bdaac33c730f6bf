// Suffix-tree speculation (SuffixDecoding, arXiv 2411.04975): a trie over every suffix (up to
// `max_depth` tokens) of this server's past outputs, shared by all requests and bounded in
// memory, plus one per request over its own prompt. The draft continues the longest suffix of
// the current context found in either, following the most frequent branch at each step.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "spec/drafter.h"

namespace tachyon::spec {

struct SuffixConfig {
  int32_t max_depth = 24;              // longest pattern + continuation stored per suffix
  int64_t max_global_tokens = 1 << 20; // past-output tokens kept (oldest outputs evicted)
  int32_t min_match = 2;               // shortest context suffix worth drafting from
};

// A count-annotated trie of token suffixes; exposed for tests.
class SuffixTrie {
 public:
  explicit SuffixTrie(int32_t max_depth) : max_depth_(max_depth) { nodes_.emplace_back(); }
  // Every suffix, truncated at max_depth; delta -1 takes back an earlier add of the same tokens,
  // and a node no stored suffix passes through any more is freed with its subtree (reused later).
  void add(std::span<const int32_t> tokens, int32_t delta = 1);
  // Longest suffix of `context` (>= min_match tokens) present in the trie, then up to k tokens
  // along the most frequent children. Returns {match length, draft}.
  std::pair<int32_t, std::vector<int32_t>> propose(std::span<const int32_t> context, int32_t k, int32_t min_match) const;
  // The tree version: from the same match, the max_nodes continuations of highest estimated
  // probability (the product of the branch frequencies along the path), best first.
  std::pair<int32_t, DraftTree> propose_tree(std::span<const int32_t> context, int32_t max_depth, int32_t max_nodes,
                                             int32_t min_match) const;
  size_t num_nodes() const { return nodes_.size() - free_.size(); }  // live, the root included

 private:
  struct Node {
    int64_t count = 0;
    std::unordered_map<int32_t, int32_t> children;
  };
  int32_t find(std::span<const int32_t> path) const;  // node index or -1
  int32_t longest_match(std::span<const int32_t> context, int32_t min_match, int32_t& length) const;
  int32_t new_node();
  void release(int32_t subtree);
  int32_t max_depth_;
  std::vector<Node> nodes_;
  std::vector<int32_t> free_;  // released nodes, reset
};

std::unique_ptr<Drafter> make_suffix_drafter(const SuffixConfig& config);

}  // namespace tachyon::spec
