// A hybrid model (Qwen3-Next: Gated DeltaNet + gated attention + MoE) through the real engine:
// continuous batching, chunked prefill, automatic prefix caching and speculative decoding with
// rollback all give the same greedy tokens as plain one-request-at-a-time decoding, and the
// prefix cache really serves the shared prompt prefix.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "base/dtype.h"

#include "engine/engine.h"
#include "io/safetensors.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "spec/draft_model.h"

namespace tachyon::engine {
namespace {

const std::string kHybrid = std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/hf/qwen3_next";

struct Outcome {
  std::vector<int32_t> tokens;
  int32_t cached = 0;
  SpecUsage spec;
};

std::vector<Outcome> run_all(model::Model& model, const std::vector<std::vector<int32_t>>& prompts, EngineConfig config,
                             int32_t max_tokens) {
  Engine engine(model, config);
  std::vector<Outcome> outs(prompts.size());
  auto collect = [&](size_t i, const std::shared_ptr<RequestStream>& stream) {
    for (;;) {
      auto o = stream->next(std::chrono::seconds(300));
      ASSERT_TRUE(o.has_value());
      ASSERT_NE(o->finish, FinishReason::Error) << o->error;
      outs[i].tokens.insert(outs[i].tokens.end(), o->tokens.begin(), o->tokens.end());
      outs[i].cached = o->num_cached_prompt_tokens;
      outs[i].spec = o->spec;
      if (o->finish != FinishReason::None) return;
    }
  };
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerationRequest r;
    r.prompt = prompts[i];
    r.sampling.temperature = 0;
    r.max_tokens = max_tokens;
    streams.push_back(engine.submit(r));
    if (config.max_concurrent == 1) collect(i, streams.back());
  }
  if (config.max_concurrent > 1)
    for (size_t i = 0; i < prompts.size(); ++i) collect(i, streams[i]);
  return outs;
}

class HybridEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto golden = io::Checkpoint::open_file(kHybrid + "/golden.safetensors");
    const auto& t = golden.get("input_ids_2");
    const auto* p = static_cast<const int64_t*>(t.data);
    const std::vector<int32_t> base(p, p + t.num_elements());  // 70 tokens
    std::mt19937 rng(3);
    for (int i = 0; i < 8; ++i) {  // a shared 48-token prefix, then different tails (some repetitive)
      std::vector<int32_t> prompt(base.begin(), base.begin() + 48);
      for (int j = 0; j < 3 + i * 5; ++j) prompt.push_back(static_cast<int32_t>(rng() % 512));
      if (i % 2) {
        const std::vector<int32_t> repeat(prompt.begin() + 40, prompt.end());
        prompt.insert(prompt.end(), repeat.begin(), repeat.end());
      }
      prompts_.push_back(prompt);
    }
  }
  void TearDown() override { std::filesystem::remove_all(temp_); }
  // The fixture with noise on its final norm: a drafter that agrees with the target often, not always.
  std::string perturbed_copy() {
    std::filesystem::create_directories(temp_);
    std::filesystem::copy_file(kHybrid + "/config.json", temp_ / "config.json");
    const auto ckpt = io::Checkpoint::open_file(kHybrid + "/model.safetensors");
    std::vector<io::TensorToWrite> tensors;
    std::vector<uint16_t> noisy;
    std::mt19937 rng(1);
    std::normal_distribution<float> noise(0.f, 0.6f);
    for (const auto& [name, t] : ckpt.tensors()) {
      tensors.push_back({name, t.dtype, t.shape, t.data});
      if (name == "model.norm.weight") {
        const auto* w = static_cast<const uint16_t*>(t.data);
        for (int64_t i = 0; i < t.num_elements(); ++i) noisy.push_back(f32_to_bf16(bf16_to_f32(w[i]) + noise(rng)));
        tensors.back().data = noisy.data();
      }
    }
    io::write_safetensors((temp_ / "model.safetensors").string(), tensors);
    return temp_.string();
  }
  std::filesystem::path temp_ =
      std::filesystem::temp_directory_path() / ("tachyon-hybrid-drafter-" + std::to_string(::getpid()));
  std::unique_ptr<kernels::Backend> backend_ = kernels::make_backend("cpu");
  std::unique_ptr<model::Model> model_ = model::load_model(kHybrid, *backend_);
  std::vector<std::vector<int32_t>> prompts_;
};

TEST_F(HybridEngine, BatchingPrefixCachingAndSpeculationKeepGreedyTokensIdentical) {
  const auto plain = run_all(*model_, prompts_, {.max_concurrent = 1, .num_blocks = 256, .prefix_cache = false}, 24);
  // Batched, chunked (small step budget) and prefix-cached.
  const auto batched =
      run_all(*model_, prompts_, {.max_concurrent = 8, .max_tokens_per_step = 40, .num_blocks = 256}, 24);
  int32_t cached = 0;
  for (size_t i = 0; i < prompts_.size(); ++i) {
    EXPECT_EQ(batched[i].tokens, plain[i].tokens) << "prompt " << i;
    cached += batched[i].cached;
  }
  EXPECT_GT(cached, 0) << "prefix caching never served a hybrid prompt";
  // Speculative decoding: the model drafting for itself (every draft accepted: multi-row
  // verification), and another tiny model of the same vocabulary drafting (partial
  // rejections: the recurrent state is rolled back inside the verified rows).
  auto self = spec::make_draft_model_drafter(kHybrid, kHybrid, *model_, *backend_);
  const std::string perturbed = perturbed_copy();
  auto near = spec::make_draft_model_drafter(perturbed, kHybrid, *model_, *backend_);
  // "deep": 9 drafts per step, deeper than the state ring's default (the engine sizes it k + 1).
  for (auto [name, drafter] :
       {std::pair{"self", self.get()}, std::pair{"perturbed", near.get()}, std::pair{"deep", near.get()}}) {
    EngineConfig config{.max_concurrent = 4, .num_blocks = 256};
    config.drafter = drafter;
    config.auto_k = false;
    if (std::string(name) == "deep") config.num_speculative_tokens = 9;
    const auto spec = run_all(*model_, prompts_, config, 24);
    int32_t drafted = 0, accepted = 0;
    for (size_t i = 0; i < prompts_.size(); ++i) {
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << name << " prompt " << i;
      drafted += spec[i].spec.num_drafted;
      accepted += spec[i].spec.num_accepted;
    }
    std::printf("%s: %d drafted, %d accepted\n", name, drafted, accepted);
    EXPECT_GT(accepted, 0) << name;
    if (std::string(name) != "self") {
      EXPECT_LT(accepted, drafted) << "no rejection: rollback not exercised";
    }
  }
}

}  // namespace
}  // namespace tachyon::engine
