// The speculation options tachyon run and serve share (cli/spec_options.h): each drafter's k_max
// where the user gives none, and that a model-free drafter really drafts that deep.
#include "cli/spec_options.h"

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "../engine/engine_test_helpers.h"

namespace tachyon::cli {
namespace {

const std::string kDemo = std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo";

struct Demo {
  std::unique_ptr<kernels::Backend> backend = kernels::make_backend("cpu");
  std::unique_ptr<model::Model> model = model::load_model(kDemo, *backend);
};
Demo& demo() {
  static Demo d;
  return d;
}

int32_t lane_k(const engine::EngineConfig& config, const std::string& name) {
  for (const spec::DrafterLane& lane : config.drafters)
    if (lane.drafter->name() == name) return lane.num_speculative_tokens;
  ADD_FAILURE() << "no " << name << " lane";
  return -1;
}

TEST(SpecOptions, TheDefaultSetGivesPromptLookupMoreDraftsThanTheModelDrafters) {
  engine::EngineConfig config;
  const SpecDrafters held = SpecOptions{}.apply(kDemo, *demo().model, *demo().backend, config);
  ASSERT_GE(config.drafters.size(), 3u);
  EXPECT_EQ(lane_k(config, "ngram"), spec::kModelFreeMaxDrafts);
  EXPECT_GT(spec::kModelFreeMaxDrafts, config.num_speculative_tokens);
  EXPECT_EQ(lane_k(config, "draft"), config.num_speculative_tokens);
  EXPECT_EQ(lane_k(config, "mtp"), config.num_speculative_tokens);
}

TEST(SpecOptions, AGivenKHoldsForEveryLane) {
  engine::EngineConfig config;
  SpecOptions options;
  options.speculative_config = R"({"num_speculative_tokens":3})";
  const SpecDrafters held = options.apply(kDemo, *demo().model, *demo().backend, config);
  for (const spec::DrafterLane& lane : config.drafters) EXPECT_EQ(lane.num_speculative_tokens, 3) << lane.drafter->name();
}

TEST(SpecOptions, PinnedModelFreeMethodsDraftSixUnlessToldOtherwise) {
  for (const char* method : {"ngram", "suffix"}) {
    engine::EngineConfig config;
    SpecOptions options;
    options.speculative_config = std::string(R"({"method":")") + method + R"("})";
    const SpecDrafters held = options.apply(kDemo, *demo().model, *demo().backend, config);
    EXPECT_EQ(config.num_speculative_tokens, spec::kModelFreeMaxDrafts) << method;
    EXPECT_TRUE(config.model_free_drafter);
  }
  engine::EngineConfig config;
  SpecOptions options;
  options.speculative_config = R"({"method":"ngram","num_speculative_tokens":2})";
  const SpecDrafters held = options.apply(kDemo, *demo().model, *demo().backend, config);
  EXPECT_EQ(config.num_speculative_tokens, 2);
}

// Through the engine: on text that repeats itself, pinned prompt lookup (auto-k off, so every
// step drafts k_max where the text allows) drafts more than the model drafters' 4 per step.
TEST(SpecOptions, PromptLookupDraftsPastFourPerStepOnRepeatingText) {
  engine::EngineConfig config{.max_concurrent = 1, .kv_memory_bytes = int64_t{64} << 20};
  SpecOptions options;
  options.speculative_config = R"({"method":"ngram","disable_auto_k":true,"disable_gates":true})";
  const SpecDrafters held = options.apply(kDemo, *demo().model, *demo().backend, config);
  engine::Engine engine(*demo().model, config);
  // A 24-token phrase four times over: the greedy continuation of such text repeats it.
  std::vector<int32_t> phrase = engine::test_helpers::random_prompt(24, 7), prompt;
  for (int i = 0; i < 4; ++i) prompt.insert(prompt.end(), phrase.begin(), phrase.end());
  auto stream = engine.submit(engine::test_helpers::greedy(prompt, 96));
  engine::RequestOutput last;
  const std::vector<int32_t> tokens = engine::test_helpers::collect(*stream, &last);
  ASSERT_EQ(tokens.size(), 96u);
  const engine::SpecUsage& usage = last.spec;
  ASSERT_GT(usage.num_steps, 0);
  EXPECT_GT(usage.num_accepted, 0);
  EXPECT_GT(static_cast<double>(usage.num_drafted) / usage.num_steps, 4.0)
      << usage.num_drafted << " drafts in " << usage.num_steps << " steps";
}

}  // namespace
}  // namespace tachyon::cli
