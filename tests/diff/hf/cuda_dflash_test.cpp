// The DFlash block drafter on the CUDA backend: through the engine, greedy output with the
// drafter (chains and DDTree trees, alone and batched) is the plain greedy output of the same
// backend, and drafts are accepted. Skips when no GPU is visible.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "io/safetensors.h"
#include "kernels/cuda/cuda_backend.h"
#include "model/dflash_head.h"
#include "model/model.h"
#include "spec/dflash.h"

namespace tachyon::testing {
namespace {

std::vector<int32_t> golden_ids(const io::Checkpoint& golden, const std::string& name) {
  const auto& t = golden.get(name);
  const auto* p = static_cast<const int64_t*>(t.data);
  return std::vector<int32_t>(p, p + t.num_elements());
}

struct Outputs {
  std::vector<std::vector<int32_t>> tokens;
  engine::EngineStats stats;
};

Outputs run_engine(model::Model& model, const std::vector<std::vector<int32_t>>& prompts, spec::Drafter* drafter,
        int32_t max_concurrent, int32_t tree_nodes) {
  engine::EngineConfig config{.max_concurrent = max_concurrent, .num_blocks = 512};
  config.drafter = drafter;
  config.num_speculative_tokens = 7;
  config.max_tree_nodes = tree_nodes;
  engine::Engine engine(model, config);
  std::vector<std::shared_ptr<engine::RequestStream>> streams;
  for (const auto& p : prompts) {
    engine::GenerationRequest r;
    r.prompt = p;
    r.max_tokens = 64;
    streams.push_back(engine.submit(r));
  }
  Outputs out;
  for (auto& s : streams) {
    std::vector<int32_t> tokens;
    for (;;) {
      auto o = s->next(std::chrono::seconds(120));
      if (!o) {
        ADD_FAILURE() << "timed out";
        break;
      }
      tokens.insert(tokens.end(), o->tokens.begin(), o->tokens.end());
      if (o->finish != engine::FinishReason::None) break;
    }
    out.tokens.push_back(tokens);
  }
  out.stats = engine.stats();
  return out;
}

TEST(CudaDFlash, GreedyOutputEqualsPlainDecodingAndDraftsAreAccepted) {
  if (kernels::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  const std::string dir = std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo";
  auto backend = kernels::make_backend("cuda");
  auto model = model::load_model(dir, *backend);
  auto drafter = spec::make_dflash_drafter(model::DFlashHead::load(dir + "/dflash", dir, model->config(), *backend),
                                           *backend);
  const auto golden = io::Checkpoint::open_file(dir + "/golden.safetensors");
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) {
    auto p = golden_ids(golden, i % 2 ? "chat.input_ids" : "code.input_ids");
    p.resize(p.size() - static_cast<size_t>(i % 3));
    prompts.push_back(p);
  }
  const Outputs plain = run_engine(*model, prompts, nullptr, 8, 0);
  for (const auto& [concurrent, nodes] : std::vector<std::pair<int32_t, int32_t>>{{1, 0}, {8, 0}, {8, 12}}) {
    const Outputs spec = run_engine(*model, prompts, drafter.get(), concurrent, nodes);
    EXPECT_EQ(spec.tokens, plain.tokens) << "concurrency " << concurrent << ", tree nodes " << nodes;
    EXPECT_GT(spec.stats.spec_accepted_tokens, 0u);
    if (nodes > 0) {
      EXPECT_GT(spec.stats.spec_tree_steps, 0u);
    }
    std::printf("CUDA DFlash, concurrency %d, tree nodes %d: %llu drafted, %llu accepted over %llu steps\n", concurrent,
                nodes, static_cast<unsigned long long>(spec.stats.spec_drafted_tokens),
                static_cast<unsigned long long>(spec.stats.spec_accepted_tokens),
                static_cast<unsigned long long>(spec.stats.spec_steps));
  }
}

}  // namespace
}  // namespace tachyon::testing
