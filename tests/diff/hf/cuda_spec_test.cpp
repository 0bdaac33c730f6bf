// Speculation on the CUDA backend: through the engine, greedy output with each drafter (prompt
// lookup, the draft model, MTP heads, the DFlash block drafter; chains and trees, alone and
// batched) is the plain greedy output of the same backend, and drafts are accepted. Skips when
// no GPU is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "io/safetensors.h"
#include "kernels/cuda/cuda_backend.h"
#include "model/dflash_head.h"
#include "model/model.h"
#include "spec/dflash.h"
#include "spec/draft_model.h"
#include "spec/mtp.h"
#include "spec/ngram.h"

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
        int32_t max_concurrent, int32_t tree_nodes, int32_t k = 7) {
  engine::EngineConfig config{.max_concurrent = max_concurrent, .num_blocks = 512};
  config.drafter = drafter;
  config.num_speculative_tokens = k;
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

const std::string kDemo = std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo";

std::vector<std::vector<int32_t>> demo_prompts() {
  const auto golden = io::Checkpoint::open_file(kDemo + "/golden.safetensors");
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) {
    auto p = golden_ids(golden, i % 2 ? "chat.input_ids" : "code.input_ids");
    p.resize(p.size() - static_cast<size_t>(i % 3));
    prompts.push_back(p);
  }
  return prompts;
}

void expect_lossless(model::Model& model, spec::Drafter& drafter, const std::string& name,
                     const std::vector<std::pair<int32_t, int32_t>>& concurrency_and_nodes, int32_t k) {
  const auto prompts = demo_prompts();
  const Outputs plain = run_engine(model, prompts, nullptr, 8, 0);
  for (const auto& [concurrent, nodes] : concurrency_and_nodes) {
    const Outputs spec = run_engine(model, prompts, &drafter, concurrent, nodes, k);
    size_t first_diff = 0;
    for (size_t i = 0; i < prompts.size(); ++i)
      if (spec.tokens[i] != plain.tokens[i]) {
        const auto& a = spec.tokens[i];
        const auto& b = plain.tokens[i];
        first_diff = static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
        ADD_FAILURE() << name << ", k " << k << ", concurrency " << concurrent << ", tree nodes " << nodes
                      << ": request " << i << " leaves plain decoding at token " << first_diff;
        break;
      }
    EXPECT_GT(spec.stats.spec_accepted_tokens, 0u) << name;
    if (nodes > 0) {
      EXPECT_GT(spec.stats.spec_tree_steps, 0u) << name;
    }
    std::printf("CUDA %s, k %d, concurrency %d, tree nodes %d: %llu drafted, %llu accepted over %llu steps\n",
                name.c_str(), k, concurrent, nodes, static_cast<unsigned long long>(spec.stats.spec_drafted_tokens),
                static_cast<unsigned long long>(spec.stats.spec_accepted_tokens),
                static_cast<unsigned long long>(spec.stats.spec_steps));
  }
}

TEST(CudaSpeculation, GreedyOutputEqualsPlainDecodingForEachDrafter) {
  if (kernels::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  auto backend = kernels::make_backend("cuda");
  auto model = model::load_model(kDemo, *backend);
  for (int32_t k : {3, 7}) {
    auto ngram = spec::make_ngram_drafter({});
    expect_lossless(*model, *ngram, "prompt lookup", {{1, 0}, {8, 0}}, k);
    auto draft = spec::make_draft_model_drafter(kDemo + "/drafter", kDemo, *model, *backend);
    expect_lossless(*model, *draft, "draft model", {{1, 0}, {8, 0}, {8, 12}}, k);
    auto mtp = spec::make_mtp_drafter(model::MtpHead::load(kDemo, model->config(), *backend), *backend);
    expect_lossless(*model, *mtp, "MTP", {{1, 0}, {8, 0}}, k);
  }
}

TEST(CudaDFlash, GreedyOutputEqualsPlainDecodingAndDraftsAreAccepted) {
  if (kernels::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  auto backend = kernels::make_backend("cuda");
  auto model = model::load_model(kDemo, *backend);
  for (int32_t k : {3, 7}) {
    auto drafter = spec::make_dflash_drafter(
        model::DFlashHead::load(kDemo + "/dflash", kDemo, model->config(), *backend), *backend);
    expect_lossless(*model, *drafter, "DFlash", {{1, 0}, {8, 0}, {8, 12}}, k);
  }
}

}  // namespace
}  // namespace tachyon::testing
