// Model::set_draft_vocabulary: a drafting model's logits over the first n token ids are exactly
// those columns of its full logits (and its argmax is theirs); n = 0 restores the whole head.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "kernels/backend.h"
#include "model/model.h"

namespace tachyon::model {
namespace {

TEST(DraftVocabulary, LogitsAreTheFirstColumnsOfTheFullLogits) {
  auto backend = kernels::make_backend("cpu");
  auto model = load_model(std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo/drafter", *backend);
  const std::vector<int32_t> ids = {11, 300, 25, 7000, 42, 5};
  auto run = [&](bool argmax_only) {
    kv::KvCache kv(*backend, model->kv_layout(16));
    const auto seq = kv.add_sequence();
    EXPECT_TRUE(kv.reserve(seq, static_cast<int32_t>(ids.size())));
    Batch batch;
    batch.add(seq, ids, 0, LogitRows::All);
    if (argmax_only) batch.outputs = StepOutputs::argmax();
    return model->forward(batch, kv);
  };
  const StepOutput full = run(false);
  const int64_t vocab = full.vocab_size, n = 1500;
  ASSERT_EQ(vocab, model->config().vocab_size);
  model->set_draft_vocabulary(n);
  const StepOutput trimmed = run(false), trimmed_ids = run(true);
  ASSERT_EQ(trimmed.vocab_size, n);
  ASSERT_EQ(trimmed.logits.size(), ids.size() * static_cast<size_t>(n));
  for (size_t r = 0; r < ids.size(); ++r) {
    EXPECT_EQ(0, std::memcmp(trimmed.logits.data() + r * n, full.logits.data() + r * vocab, n * sizeof(float)))
        << "row " << r;
    const auto row = trimmed.logits_row(r);
    EXPECT_EQ(trimmed_ids.argmax[r], std::max_element(row.begin(), row.end()) - row.begin()) << "row " << r;
  }
  model->set_draft_vocabulary(0);
  EXPECT_EQ(run(false).logits, full.logits);
}

}  // namespace
}  // namespace tachyon::model
