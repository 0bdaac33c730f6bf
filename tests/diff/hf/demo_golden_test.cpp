// The embedded default model (models/tachyon-demo) against its golden.safetensors, computed
// by transformers in float32 from the bf16 shards (MODEL_CARD.md "Golden outputs").
#include <gtest/gtest.h>

#include "io/config.h"
#include "model/mtp_head.h"
#include "model_runner.h"

namespace tachyon::testing {
namespace {

const std::string kDemo = std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo";

TEST(DemoGolden, LogitsHiddenStatesAndGreedyMatchTransformers) {
  ModelRunner runner(kDemo);
  const auto golden = io::Checkpoint::open_file(kDemo + "/golden.safetensors");
  for (const std::string p : {"code", "chat"}) {
    const auto ids = read_ids(golden, p + ".input_ids");
    EXPECT_LE(relative_error(runner.full_logits(ids), read_f32(golden, p + ".logits")), 1e-3) << p;
    // Hidden states before the final norm (what MTP consumes).
    auto seq = runner.kv->add_sequence();
    runner.kv->reserve(seq, static_cast<int32_t>(ids.size()));
    model::Batch batch;
    batch.add(seq, ids, 0, model::LogitRows::None, /*want_hidden=*/true);
    auto out = runner.model->forward(batch, *runner.kv);
    runner.kv->remove_sequence(seq);
    EXPECT_LE(relative_error(out.hidden, read_f32(golden, p + ".hidden_prenorm")), 1e-3) << p;
    const auto expected = read_ids(golden, p + ".greedy_tokens");
    EXPECT_EQ(runner.greedy(ids, static_cast<int>(expected.size())).first, expected) << p;
  }
}

}  // namespace
}  // namespace tachyon::testing

namespace tachyon::testing {
namespace {

// The native MTP head (MODEL_CARD.md "MTP head: layout and exact math") against the golden
// mtp_logits: inputs are the golden pre-norm hidden states and next tokens, positions 0..T-1.
TEST(DemoGolden, MtpLogitsMatchTheReference) {
  auto backend = kernels::make_backend("cpu");
  const auto config = io::load_model_config(kDemo);
  auto mtp = model::MtpHead::load(kDemo, config, *backend);
  ASSERT_NE(mtp, nullptr);
  EXPECT_EQ(mtp->num_tensors(), 15);
  kv::KvCache kv(*backend, mtp->kv_layout(16));
  const auto golden = io::Checkpoint::open_file(kDemo + "/golden.safetensors");
  for (const std::string p : {"code", "chat"}) {
    const auto next = read_ids(golden, p + ".mtp_input_ids");
    const auto hidden = read_f32(golden, p + ".hidden_prenorm");
    auto seq = kv.add_sequence();
    kv.reserve(seq, static_cast<int32_t>(next.size()));
    model::Batch batch;
    batch.add(seq, next, 0, model::LogitRows::All);
    const auto out = mtp->forward(batch, hidden, kv);
    kv.remove_sequence(seq);
    EXPECT_LE(relative_error(out.logits, read_f32(golden, p + ".mtp_logits")), 1e-3) << p;
  }
}

}  // namespace
}  // namespace tachyon::testing
