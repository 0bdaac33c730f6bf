#include "spec/draft_model.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <unordered_map>

#include "base/error.h"
#include "base/json.h"
#include "kv/kv_cache.h"
#include "spec/grammar_drafts.h"
#include "spec/level_drafter.h"
#include "spec/per_request_kv.h"

namespace tachyon::spec {

namespace {

class DraftModelDrafter final : public LevelDrafter {
 public:
  DraftModelDrafter(std::unique_ptr<model::Model> model, const DraftModelConfig& config)
      : model_(std::move(model)), kv_(model_->backend(), model_->kv_layout(config.num_blocks, config.block_size)) {
    model_->set_draft_vocabulary(config.draft_vocabulary < 0 ? default_draft_vocabulary(model_->config().vocab_size)
                                                             : config.draft_vocabulary);
  }

  std::string name() const override { return "draft"; }

  void on_finish(RequestKey request, std::span<const int32_t>, int32_t) override { states_.erase(request); }

 private:
  // Up to k levels of the drafter's greedy chain (best token and runner-up per level).
  std::vector<LevelChoice> draft_levels(RequestKey request, std::span<const int32_t> tokens, int32_t k) override {
    if (k <= 0 || tokens.empty()) return {};
    State* found = states_.find(request);
    State& s = found ? *found : states_.emplace(request, State{kv_.add_sequence(), 0, {}});
    // KV holds tokens[0, synced) followed by s.tail (last proposal's drafts): keep the part
    // that the committed tokens confirm.
    int32_t valid = std::min<int32_t>(s.synced, static_cast<int32_t>(tokens.size()));
    for (size_t i = 0; i < s.tail.size() && valid == s.synced + static_cast<int32_t>(i) &&
                       valid < static_cast<int32_t>(tokens.size()) && tokens[valid] == s.tail[i];
         ++i)
      ++valid;
    valid = std::min(valid, static_cast<int32_t>(tokens.size()) - 1);  // always feed >= 1 token
    kv_.truncate(s.seq, std::min(valid, kv_.num_tokens(s.seq)));
    // A hybrid drafter whose recurrent state cannot be rolled back this far (beyond its ring)
    // continues from its last state snapshot instead.
    if (const int32_t resume = kv_.resume_position(s.seq, valid); resume < valid) {
      kv_.truncate(s.seq, resume);
      valid = resume;
    }
    s.tail.clear();
    // The chain runs on the device: level i's forward writes its choice to levels_, level i + 1
    // embeds its best token from there, and the levels are read back once at the end.
    std::span<const int32_t> feed = tokens.subspan(static_cast<size_t>(valid));
    const kernels::RepeatingStepHint hint(model_->backend(), feed.size() <= kMaxRepeatingDraftRows);
    // Under a grammar each level is read back and the next one fed the token the grammar
    // allows (GrammarLevelWalk): one wait per level instead of one per chain.
    kernels::TopTwo* out = levels_.get(k);
    const int32_t placeholder = 0;
    int32_t position = valid, done = 0;
    std::optional<GrammarLevelWalk> walk;
    if (grammar()) walk.emplace(*grammar());
    std::vector<LevelChoice> picked;
    int32_t chosen = 0;
    for (; done < k; ++done) {
      if (!kv_.reserve(s.seq, position + static_cast<int32_t>(feed.size()))) break;  // pool full: draft less
      model::Batch batch;
      batch.add(s.seq, feed, position, model::LogitRows::Last);
      if (done > 0 && !walk) batch.device_tokens = levels_.best_token(done - 1);
      batch.outputs = model::StepOutputs::top_two_on_device(out + done);
      model_->forward(batch, kv_);
      position += static_cast<int32_t>(feed.size());
      feed = std::span<const int32_t>(&placeholder, 1);
      if (walk) {
        picked.push_back(levels_.read_level(done));
        if (!walk->pick(picked.back())) {  // nothing the grammar allows among the top two
          picked.pop_back();
          break;
        }
        chosen = picked.back().best;
        feed = std::span<const int32_t>(&chosen, 1);
      }
    }
    std::vector<LevelChoice> levels = walk ? std::move(picked) : levels_.read(done);
    s.synced = static_cast<int32_t>(tokens.size());
    for (size_t i = 0; i + 1 < levels.size(); ++i) s.tail.push_back(levels[i].best);  // the last draft has no KV yet
    kv_.truncate(s.seq, std::min(kv_.num_tokens(s.seq), s.synced + static_cast<int32_t>(s.tail.size())));
    return levels;
  }

  struct State {
    kv::SeqId seq;
    int32_t synced;              // tokens[0, synced) have KV
    std::vector<int32_t> tail;   // then these drafts
  };
  std::unique_ptr<model::Model> model_;
  kv::KvCache kv_;
  DeviceLevels levels_{model_->backend()};
  PerRequestKv<State> states_{kv_};
};

}  // namespace

std::unique_ptr<Drafter> make_draft_model_drafter(const std::string& drafter_dir, const std::string& target_dir,
                                                  const model::Model& target, kernels::Backend& backend,
                                                  const DraftModelConfig& config) {
  namespace fs = std::filesystem;
  std::unique_ptr<model::Model> drafter;
  {
    const kernels::DraftWeights scope(backend, !config.exact_weights);
    drafter = model::load_model(drafter_dir, backend);
  }
  if (drafter->config().vocab_size != target.config().vocab_size)
    throw Error("drafter {}: vocab_size {} differs from the target's {}: the tokenizers are not compatible", drafter_dir,
                drafter->config().vocab_size, target.config().vocab_size);
  const fs::path own = fs::path(drafter_dir) / "tokenizer.json", parent = fs::path(target_dir) / "tokenizer.json";
  if (fs::exists(own) && fs::exists(parent) && read_file(own.string()) != read_file(parent.string()))
    throw Error("drafter {}: its tokenizer.json differs from the target's: the tokenizers are not compatible",
                drafter_dir);
  return std::make_unique<DraftModelDrafter>(std::move(drafter), config);
}

}  // namespace tachyon::spec
