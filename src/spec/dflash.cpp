#include "spec/dflash.h"

#include <algorithm>
#include <map>

#include <fmt/ranges.h>

#include "base/error.h"
#include "kernels/token_sampling.h"
#include "kv/kv_cache.h"
#include "spec/block_tree.h"
#include "spec/per_request_kv.h"

namespace tachyon::spec {

namespace {

class DFlashDrafter final : public Drafter {
 public:
  DFlashDrafter(std::unique_ptr<model::DFlashHead> head, kernels::Backend& backend, const DFlashConfig& config)
      : head_(std::move(head)), kv_(backend, head_->kv_layout(config.num_blocks, config.block_size)),
        top_k_(std::max(1, config.tree_top_k)) {}

  std::string name() const override { return "dflash"; }
  bool wants_hidden() const override { return true; }
  std::vector<int32_t> hidden_layers() const override { return head_->target_layer_ids(); }
  bool proposes_trees() const override { return true; }
  // Auto mode weighs DDTree trees against chains by measured step cost, and sizes each tree by
  // the drafter's node probabilities against the measured verify cost (SpecPolicy::size_tree;
  // EngineConfig::max_tree_nodes).
  bool trees_by_default() const override { return true; }
  bool scores_tree_nodes() const override { return true; }

  void observe_hidden(RequestKey request, int32_t first, std::span<const float> hidden, int32_t count) override {
    const size_t f = static_cast<size_t>(head_->feature_size());
    if (hidden.size() != static_cast<size_t>(count) * f)
      throw Error("DFlash: the target returned {} floats for {} positions; the drafter reads {} per position "
                  "(target layers {}): the target does not expose the named layers",
                  hidden.size(), count, f, fmt::join(head_->target_layer_ids(), ", "));
    State& s = state(request, first);
    for (int32_t i = 0; i < count; ++i)
      if (first + i >= s.base + s.built)
        s.pending[first + i].assign(hidden.begin() + static_cast<long>(i * f), hidden.begin() + static_cast<long>((i + 1) * f));
  }

  void on_finish(RequestKey request, std::span<const int32_t>, int32_t) override { states_.erase(request); }

  std::vector<int32_t> propose(RequestKey request, std::span<const int32_t> tokens, int32_t k) override {
    const std::vector<float> logits = draft(request, tokens);
    std::vector<int32_t> drafts;
    if (logits.empty()) return drafts;
    const int64_t v = head_->draft_vocabulary();
    const int32_t n = std::min<int32_t>(k, head_->block_size() - 1);
    for (int32_t j = 0; j < n; ++j)
      drafts.push_back(kernels::argmax_token({logits.data() + j * v, static_cast<size_t>(v)}));
    return drafts;
  }

  DraftTree propose_tree(RequestKey request, std::span<const int32_t> tokens, int32_t max_depth,
                         int32_t max_nodes) override {
    const std::vector<float> logits = draft(request, tokens);
    if (logits.empty()) return {};
    const int64_t v = head_->draft_vocabulary();
    const int32_t depth = std::min<int32_t>(max_depth, head_->block_size() - 1);
    std::vector<PositionTopK> positions;
    for (int32_t j = 0; j < depth; ++j)
      positions.push_back(top_k_log_probs({logits.data() + j * v, static_cast<size_t>(v)}, top_k_));
    return best_first_tree(positions, max_nodes);
  }

 private:
  // The block's logits ([B-1, draft vocabulary]) after the committed `tokens`, or nothing when
  // a hidden state is missing or the pool is full.
  std::vector<float> draft(RequestKey request, std::span<const int32_t> tokens) {
    State* found = states_.find(request);
    if (!found || tokens.empty()) return {};
    State& s = *found;
    const int32_t n = static_cast<int32_t>(tokens.size()) - 1;  // x_n: the anchor
    const int32_t from = s.base + s.built;
    if (from > n) return {};
    for (int32_t t = from; t < n; ++t)
      if (!s.pending.count(t)) return {};  // a gap: no draft this time
    std::vector<float> features;
    features.reserve(static_cast<size_t>(n - from) * static_cast<size_t>(head_->feature_size()));
    for (int32_t t = from; t < n; ++t) features.insert(features.end(), s.pending[t].begin(), s.pending[t].end());
    // Cache positions count from the first position with a hidden state (after a prefix-cache
    // hit the earlier ones have none); RoPE sees only differences.
    std::vector<float> logits =
        head_->draft_block(kv_, s.seq, features, from - s.base, n - from, tokens[static_cast<size_t>(n)]);
    if (logits.empty()) return {};
    s.built = n - s.base;
    s.pending.erase(s.pending.begin(), s.pending.lower_bound(n));
    return logits;
  }

  struct State {
    kv::SeqId seq;
    int32_t base;       // first position with a hidden state
    int32_t built = 0;  // the cache holds context rows of positions [base, base + built)
    std::map<int32_t, std::vector<float>> pending;  // features not yet in the cache
  };
  State& state(RequestKey request, int32_t first) {
    State* found = states_.find(request);
    return found ? *found : states_.emplace(request, State{kv_.add_sequence(), first, 0, {}});
  }

  std::unique_ptr<model::DFlashHead> head_;
  kv::KvCache kv_;
  int32_t top_k_;
  PerRequestKv<State> states_{kv_};
};

}  // namespace

std::unique_ptr<Drafter> make_dflash_drafter(std::unique_ptr<model::DFlashHead> head, kernels::Backend& backend,
                                             const DFlashConfig& config) {
  head->set_draft_vocabulary(config.draft_vocabulary);
  return std::make_unique<DFlashDrafter>(std::move(head), backend, config);
}

}  // namespace tachyon::spec
