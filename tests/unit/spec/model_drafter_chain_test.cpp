// The model drafters run their chains on the device (StepOutputs::top_two_on_device and
// Batch::device_tokens: each level embeds the previous level's choice without a round trip).
// Their levels must be exactly what the same model gives level by level through the host: the
// drafter model's own greedy continuation, and the MTP head's recursion with host-side choices.
// (Draft precision, kernels::DraftWeights, is the draft model's default; the MTP heads here are
// loaded as stored.)
#include <gtest/gtest.h>

#include "kernels/backend.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "model/mtp_head.h"
#include "spec/draft_model.h"
#include "spec/draft_tree.h"
#include "spec/mtp.h"

namespace tachyon::spec {
namespace {

const std::string kDemo = std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo";
const std::vector<int32_t> kPrompt = {785, 4213, 29, 1018, 11, 3051, 9, 264, 30, 77, 1203, 5, 900, 42, 6};

TEST(ModelDrafterChain, DraftModelLevelsAreTheDrafterModelsGreedyTokens) {
  auto backend = kernels::make_backend("cpu");
  auto target = model::load_model(kDemo, *backend);
  auto drafter = make_draft_model_drafter(kDemo + "/drafter", kDemo, *target, *backend, {.draft_vocabulary = 0});
  const int32_t k = 5;
  const DraftTree tree = drafter->propose_tree(1, kPrompt, k, 2 * k);
  // Host path: the drafter model, one forward per token, full logits, choices on the host. It is
  // loaded as the drafter loads it: its matrices in draft precision (int8 on the CPU), so this
  // also checks that the drafter does (with the weights as stored its levels differ).
  std::unique_ptr<model::Model> model;
  {
    const kernels::DraftWeights scope(*backend);
    model = model::load_model(kDemo + "/drafter", *backend);
  }
  model->set_draft_vocabulary(0);
  kv::KvCache kv(*backend, model->kv_layout(64));
  const auto seq = kv.add_sequence();
  ASSERT_TRUE(kv.reserve(seq, static_cast<int32_t>(kPrompt.size()) + k));
  std::vector<LevelChoice> expected;
  std::vector<int32_t> feed = kPrompt;
  int32_t position = 0;
  for (int32_t i = 0; i < k; ++i) {
    model::Batch batch;
    batch.add(seq, feed, position, model::LogitRows::Last);
    const auto out = model->forward(batch, kv);
    position += static_cast<int32_t>(feed.size());
    expected.push_back(level_choice(out.logits_row(0)));
    feed = {expected.back().best};
  }
  const DraftTree want = chain_with_runner_ups(expected, 2 * k);
  EXPECT_EQ(tree.tokens, want.tokens);
  EXPECT_EQ(tree.parents, want.parents);
  // A second proposal after a partly accepted chain continues from the committed tokens.
  std::vector<int32_t> committed = kPrompt;
  committed.push_back(expected[0].best);
  committed.push_back(expected[1].best == 7 ? 8 : 7);  // a rejection at level 2: the bonus differs
  const auto again = drafter->propose(1, committed, 3);
  kv::KvCache kv2(*backend, model->kv_layout(64));
  const auto seq2 = kv2.add_sequence();
  ASSERT_TRUE(kv2.reserve(seq2, static_cast<int32_t>(committed.size()) + 3));
  model::Batch batch;
  batch.add(seq2, committed, 0, model::LogitRows::Last);
  std::vector<int32_t> greedy;
  auto out = model->forward(batch, kv2);
  for (int32_t i = 0; i < 3; ++i) {
    greedy.push_back(level_choice(out.logits_row(0)).best);
    if (i == 2) break;
    batch.clear();
    batch.add(seq2, std::span<const int32_t>(&greedy.back(), 1), static_cast<int32_t>(committed.size()) + i,
              model::LogitRows::Last);
    out = model->forward(batch, kv2);
  }
  EXPECT_EQ(again, greedy);
}

TEST(ModelDrafterChain, MtpLevelsAreTheHeadsRecursionWithHostChoices) {
  auto backend = kernels::make_backend("cpu");
  auto target = model::load_model(kDemo, *backend);
  // The target's hidden states of the prompt, as the engine hands them to the drafter.
  kv::KvCache target_kv(*backend, target->kv_layout(64));
  const auto tseq = target_kv.add_sequence();
  ASSERT_TRUE(target_kv.reserve(tseq, static_cast<int32_t>(kPrompt.size())));
  model::Batch tb;
  tb.add(tseq, kPrompt, 0, model::LogitRows::Last, /*want_hidden=*/true);
  const auto tout = target->forward(tb, target_kv);
  const int64_t h = tout.hidden_size;
  const int32_t k = 3, n = static_cast<int32_t>(kPrompt.size()) - 1;
  auto drafter = make_mtp_drafter(model::MtpHead::load(kDemo, target->config(), *backend), *backend, 64, 16, 0);
  drafter->observe_hidden(1, 0, tout.hidden, static_cast<int32_t>(kPrompt.size()));
  const auto drafts = drafter->propose(1, kPrompt, k);
  // Host path: z_t for t < n from (x_{t+1}, h_t), then recursion with host-chosen tokens.
  auto head = model::MtpHead::load(kDemo, target->config(), *backend);
  head->set_draft_vocabulary(0);
  kv::KvCache kv(*backend, head->kv_layout(64));
  const auto seq = kv.add_sequence();
  ASSERT_TRUE(kv.reserve(seq, n + k));
  model::Batch batch;
  batch.add(seq, std::span<const int32_t>(kPrompt).subspan(1), 0, model::LogitRows::Last);
  auto out = head->forward(batch, std::span<const float>(tout.hidden).first(static_cast<size_t>(n * h)), kv, false);
  std::vector<int32_t> expected;
  for (int32_t j = 0; j < k; ++j) {
    expected.push_back(level_choice(out.logits).best);
    if (j + 1 == k) break;
    batch.clear();
    batch.add(seq, std::span<const int32_t>(&expected.back(), 1), n + j, model::LogitRows::Last);
    out = head->forward_recursive(batch, kv);
  }
  EXPECT_EQ(drafts, expected);
}

}  // namespace
}  // namespace tachyon::spec
