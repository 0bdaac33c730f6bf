#include "spec/mtp.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>

#include "kv/kv_cache.h"
#include "spec/grammar_drafts.h"
#include "spec/level_drafter.h"
#include "spec/per_request_kv.h"

namespace tachyon::spec {

namespace {

class MtpDrafter final : public LevelDrafter {
 public:
  MtpDrafter(std::unique_ptr<model::MtpHead> head, kernels::Backend& backend, int32_t num_blocks, int32_t block_size)
      : head_(std::move(head)), backend_(backend), kv_(backend, head_->kv_layout(num_blocks, block_size)) {}

  std::string name() const override { return "mtp"; }
  bool wants_hidden() const override { return true; }

  void observe_hidden(RequestKey request, int32_t first, std::span<const float> hidden, int32_t count) override {
    State& s = state(request, first);
    const size_t h = static_cast<size_t>(head_->hidden_size());
    for (int32_t i = 0; i < count; ++i)
      if (first + i >= s.base)
        s.pending[first + i].assign(hidden.begin() + static_cast<long>(i * h), hidden.begin() + static_cast<long>((i + 1) * h));
  }

  void on_finish(RequestKey request, std::span<const int32_t>, int32_t) override { states_.erase(request); }

 private:
  // Up to k levels of the head's recursive greedy chain (best token and runner-up per level).
  std::vector<LevelChoice> draft_levels(RequestKey request, std::span<const int32_t> tokens, int32_t k) override {
    State* found = states_.find(request);
    if (!found || k <= 0) return {};
    State& s = *found;
    const int32_t n = static_cast<int32_t>(tokens.size()) - 1;  // x_n: the last committed token
    // Build z_t for t = base + built .. n-1 from (x_{t+1}, h_t); all h_t must be known.
    const int32_t from = s.base + s.built;
    for (int32_t t = from; t < n; ++t)
      if (!s.pending.count(t)) return {};  // a gap (should not happen): no draft this time
    if (from >= n) return {};
    kv_.truncate(s.seq, std::min(kv_.num_tokens(s.seq), s.built));
    std::vector<int32_t> next_tokens;
    std::vector<float> hidden;
    for (int32_t t = from; t < n; ++t) {
      next_tokens.push_back(tokens[static_cast<size_t>(t + 1)]);
      hidden.insert(hidden.end(), s.pending[t].begin(), s.pending[t].end());
    }
    if (!kv_.reserve(s.seq, n - s.base + k)) return {};
    // The levels run on the device: each writes its choice to levels_, the next embeds its best
    // token from there (and reads o_t where it stayed); one read-back at the end.
    const kernels::RepeatingStepHint hint(backend_, next_tokens.size() <= kMaxRepeatingDraftRows);
    kernels::TopTwo* out = levels_.get(k);
    model::Batch batch;
    batch.add(s.seq, next_tokens, from - s.base, model::LogitRows::Last);
    batch.outputs = model::StepOutputs::top_two_on_device(out);
    head_->forward(batch, hidden, kv_, /*return_hidden=*/false);
    s.built = n - s.base;
    s.pending.erase(s.pending.begin(), s.pending.lower_bound(n));
    // Under a grammar each level is read back and the next one fed the token the grammar
    // allows (GrammarLevelWalk): one wait per level instead of one per chain.
    std::optional<GrammarLevelWalk> walk;
    if (grammar()) walk.emplace(*grammar());
    std::vector<LevelChoice> picked;
    int32_t token = 0;  // the token the next level embeds, when chosen on the host
    auto pick = [&](int32_t j) {
      picked.push_back(levels_.read_level(j));
      if (!walk->pick(picked.back())) {
        picked.pop_back();
        return false;
      }
      token = picked.back().best;
      return true;
    };
    bool open = !walk || pick(0);
    for (int32_t j = 1; j < k && open; ++j) {
      // Recursive step: the head's own output stands in for the target's hidden state.
      batch.clear();
      batch.add(s.seq, std::span<const int32_t>(&token, 1), n - s.base + j - 1, model::LogitRows::Last);
      if (!walk) batch.device_tokens = levels_.best_token(j - 1);
      batch.outputs = model::StepOutputs::top_two_on_device(out + j);
      head_->forward_recursive(batch, kv_);
      if (walk) open = pick(j);
    }
    std::vector<LevelChoice> levels = walk ? std::move(picked) : levels_.read(k);
    kv_.truncate(s.seq, s.built);  // recursive entries were built from drafts: not kept
    return levels;
  }

  struct State {
    kv::SeqId seq;
    int32_t base;        // first position with a hidden state (later ones after a prefix-cache hit)
    int32_t built = 0;   // MTP KV holds z_t for t in [base, base + built), at positions t - base
    std::map<int32_t, std::vector<float>> pending;  // h_t not yet turned into z_t
  };
  State& state(RequestKey request, int32_t first) {
    State* found = states_.find(request);
    return found ? *found : states_.emplace(request, State{kv_.add_sequence(), first, 0, {}});
  }

  std::unique_ptr<model::MtpHead> head_;
  kernels::Backend& backend_;
  kv::KvCache kv_;
  DeviceLevels levels_{backend_};
  PerRequestKv<State> states_{kv_};
};

}  // namespace

std::unique_ptr<Drafter> make_mtp_drafter(std::unique_ptr<model::MtpHead> head, kernels::Backend& backend,
                                          int32_t num_blocks, int32_t block_size, int64_t draft_vocabulary) {
  if (draft_vocabulary < 0) draft_vocabulary = default_draft_vocabulary(head->vocab_size());
  head->set_draft_vocabulary(draft_vocabulary);
  return std::make_unique<MtpDrafter>(std::move(head), backend, num_blocks, block_size);
}

}  // namespace tachyon::spec
