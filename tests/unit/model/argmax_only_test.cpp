// StepOutputs::argmax: the step returns each logit row's argmax (Backend::argmax, on the
// device where there is one) instead of its logits, and it is the first maximum of the
// logits the same step would have returned.
#include <gtest/gtest.h>

#include <algorithm>

#include "kernels/backend.h"
#include "model/model.h"

namespace tachyon::model {
namespace {

TEST(ArgmaxOnly, StepReturnsTheFirstMaximumOfEachLogitRow) {
  auto backend = kernels::make_backend("cpu");
  auto model = load_model(std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo", *backend);
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7}, b = {9, 8, 7};
  StepOutput with_logits, with_ids;
  for (bool ids_only : {false, true}) {
    kv::KvCache kv(*backend, model->kv_layout(16));
    const auto sa = kv.add_sequence(), sb = kv.add_sequence();
    ASSERT_TRUE(kv.reserve(sa, static_cast<int32_t>(a.size())));
    ASSERT_TRUE(kv.reserve(sb, static_cast<int32_t>(b.size())));
    Batch batch;
    batch.add(sa, a, 0, LogitRows::All);
    batch.add(sb, b, 0, LogitRows::Last);
    if (ids_only) batch.outputs = StepOutputs::argmax();
    (ids_only ? with_ids : with_logits) = model->forward(batch, kv);
  }
  const size_t rows = a.size() + 1;
  ASSERT_EQ(with_ids.argmax.size(), rows);
  EXPECT_TRUE(with_ids.logits.empty());
  ASSERT_EQ(with_logits.logits.size(), rows * static_cast<size_t>(with_logits.vocab_size));
  for (size_t r = 0; r < rows; ++r) {
    const auto row = with_logits.logits_row(r);
    EXPECT_EQ(with_ids.argmax[r], std::max_element(row.begin(), row.end()) - row.begin()) << "row " << r;
  }
}

}  // namespace
}  // namespace tachyon::model
