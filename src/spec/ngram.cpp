#include "spec/ngram.h"

#include <algorithm>
#include <unordered_set>

namespace tachyon::spec {

namespace {

// Calls visit(start of the continuation) for each earlier occurrence of the context's last n
// tokens, n from max_n down to min_n, most recent first, while visit returns true. An
// occurrence counts only with at least one token after it.
template <typename Visit>
void for_each_occurrence(std::span<const int32_t> tokens, const NgramConfig& config, Visit visit) {
  const int64_t size = static_cast<int64_t>(tokens.size());
  for (int32_t n = config.max_n; n >= config.min_n; --n) {
    if (size <= n) continue;
    const auto pattern = tokens.subspan(static_cast<size_t>(size - n));
    const int64_t stop = std::max<int64_t>(0, size - n - config.max_lookback);
    for (int64_t start = size - n - 1; start >= stop; --start)
      if (std::equal(pattern.begin(), pattern.end(), tokens.begin() + start) && !visit(start + n)) return;
  }
}

}  // namespace

std::vector<int32_t> ngram_propose(std::span<const int32_t> tokens, int32_t k, const NgramConfig& config) {
  std::vector<int32_t> draft;
  for_each_occurrence(tokens, config, [&](int64_t from) {
    const int64_t to = std::min(static_cast<int64_t>(tokens.size()), from + k);
    draft.assign(tokens.begin() + from, tokens.begin() + to);
    return false;  // the most recent occurrence of the longest n
  });
  return draft;
}

DraftTree ngram_propose_tree(std::span<const int32_t> tokens, int32_t max_depth, int32_t max_nodes,
                             const NgramConfig& config) {
  DraftTree tree;
  for_each_occurrence(tokens, config, [&](int64_t from) {
    int32_t node = 0;
    for (int64_t i = from; i < std::min(static_cast<int64_t>(tokens.size()), from + max_depth); ++i) {
      if (tree.child(node, tokens[i]) < 0 && static_cast<int32_t>(tree.size()) >= max_nodes) break;
      node = tree.add(node, tokens[i]);
    }
    return static_cast<int32_t>(tree.size()) < max_nodes;
  });
  return tree;
}

double trigram_repetition(std::span<const int32_t> tokens) {
  if (tokens.size() < 4) return 0.0;
  std::unordered_set<uint64_t> seen;
  size_t repeats = 0, total = 0;
  for (size_t i = 0; i + 3 <= tokens.size(); ++i) {
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(tokens[i])) * 0x9e3779b97f4a7c15ull) ^
                         (static_cast<uint64_t>(static_cast<uint32_t>(tokens[i + 1])) << 21) ^
                         static_cast<uint64_t>(static_cast<uint32_t>(tokens[i + 2])) * 0xff51afd7ed558ccdull;
    repeats += !seen.insert(key).second;
    ++total;
  }
  return static_cast<double>(repeats) / static_cast<double>(total);
}

namespace {
class NgramDrafter final : public Drafter {
 public:
  explicit NgramDrafter(const NgramConfig& c) : config_(c) {}
  std::string name() const override { return "ngram"; }
  std::vector<int32_t> propose(RequestKey, std::span<const int32_t> tokens, int32_t k) override {
    return ngram_propose(tokens, k, config_);
  }
  DraftTree propose_tree(RequestKey, std::span<const int32_t> tokens, int32_t max_depth, int32_t max_nodes) override {
    return ngram_propose_tree(tokens, max_depth, max_nodes, config_);
  }
  bool proposes_trees() const override { return true; }
  // Auto mode measures its trees against its chains (TreeOrChain) and keeps the faster: since a
  // tree's verify rows share their attention passes on the CPU (cpu/isa/attention_avx512.cpp),
  // its trees (several earlier occurrences' continuations) measured 2.05x plain on the demo's
  // code completion against its chains' 1.96x (spec_bench, one thread, CPU time, 0320699).
  bool trees_by_default() const override { return true; }

 private:
  NgramConfig config_;
};
}  // namespace

std::unique_ptr<Drafter> make_ngram_drafter(const NgramConfig& config) { return std::make_unique<NgramDrafter>(config); }

}  // namespace tachyon::spec
