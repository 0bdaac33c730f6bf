// Speculation on the CUDA backend: through the engine, greedy output with each drafter (prompt
// lookup, the draft model, MTP heads, the DFlash block drafter; chains and trees, alone and
// batched) is the plain greedy output of the same backend, and so is seeded sampled output (its
// draws keyed by position), and drafts are accepted. Skips when
// no GPU is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "io/safetensors.h"
#include "kernels/cuda/cuda_backend.h"
#include "model/dflash_head.h"
#include "model/model.h"
#include "spec/dflash.h"
#include "spec/drafter.h"
#include "spec/draft_model.h"
#include "spec/mtp.h"
#include "spec/ngram.h"
#include "../../unit/engine/engine_test_helpers.h"
#include "model_runner.h"

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

// `sampled` (when given) replaces greedy decoding: prompt i is drawn with those parameters and
// the seed sampled->seed + i.
Outputs run_engine(model::Model& model, const std::vector<std::vector<int32_t>>& prompts, spec::Drafter* drafter,
        int32_t max_concurrent, int32_t tree_nodes, int32_t k = 7,
        engine::EngineConfig::Overlap overlap = engine::EngineConfig::Overlap::Auto,
        const engine::SamplingParams* sampled = nullptr) {
  engine::EngineConfig config{.max_concurrent = max_concurrent, .num_blocks = 512};
  config.overlap_steps = overlap;
  config.drafter = drafter;
  config.num_speculative_tokens = k;
  config.max_tree_nodes = tree_nodes;
  engine::Engine engine(model, config);
  std::vector<std::shared_ptr<engine::RequestStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i) {
    engine::GenerationRequest r;
    r.prompt = prompts[i];
    r.max_tokens = 64;
    r.sampling.temperature = 0.f;  // greedy (the default draws at temperature 1)
    if (sampled) {
      r.sampling = *sampled;
      r.sampling.seed = sampled->seed.value_or(0) + i;
    }
    streams.push_back(engine.submit(r));
  }
  Outputs out;
  for (auto& s : streams) out.tokens.push_back(engine::test_helpers::collect(*s));
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

// Drafters that isolate one part of speculation: hidden-state capture without drafts, and
// drafts (wrong ones, or the plain output's own next tokens) without hidden states.
class HiddenOnlyDrafter final : public spec::Drafter {
 public:
  explicit HiddenOnlyDrafter(std::vector<int32_t> layers) : layers_(std::move(layers)) {}
  std::string name() const override { return "hidden-only"; }
  std::vector<int32_t> propose(spec::RequestKey, std::span<const int32_t>, int32_t) override { return {}; }
  bool wants_hidden() const override { return true; }
  std::vector<int32_t> hidden_layers() const override { return layers_; }
  void observe_hidden(spec::RequestKey, int32_t, std::span<const float>, int32_t) override {}

 private:
  std::vector<int32_t> layers_;
};

class FixedDrafter final : public spec::Drafter {
 public:
  explicit FixedDrafter(std::vector<std::vector<int32_t>> continuations) : continuations_(std::move(continuations)) {}
  std::string name() const override { return "fixed"; }
  // The plain output's next tokens when `tokens` is a plain run's prefix, else token 7s.
  std::vector<int32_t> propose(spec::RequestKey, std::span<const int32_t> tokens, int32_t k) override {
    for (const auto& c : continuations_)
      if (c.size() > tokens.size() && std::equal(tokens.begin(), tokens.end(), c.begin())) {
        const size_t n = std::min(static_cast<size_t>(k), c.size() - tokens.size());
        return std::vector<int32_t>(c.begin() + static_cast<long>(tokens.size()),
                                    c.begin() + static_cast<long>(tokens.size() + n));
      }
    return std::vector<int32_t>(static_cast<size_t>(k), 7);
  }

 private:
  std::vector<std::vector<int32_t>> continuations_;
};

// Row-level batch invariance of the demo model on CUDA: a prompt's rows alone, batched with
// another prompt, and decoded one at a time give the same logits.
TEST(CudaBatchInvariance, DemoRowsAloneBatchedAndDecodedGiveTheSameLogits) {
  if (kernels::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  ModelRunner r(kDemo, "cuda");
  const auto prompts = demo_prompts();
  const auto& a = prompts[0];
  const auto& b = prompts[1];
  const size_t v = static_cast<size_t>(r.vocab());
  auto report = [&](const char* what, const std::vector<float>& x, const std::vector<float>& y, size_t rows) {
    size_t first = rows;
    double worst = 0;
    for (size_t i = 0; i < rows; ++i) {
      const bool same = std::memcmp(x.data() + i * v, y.data() + i * v, v * sizeof(float)) == 0;
      if (!same && first == rows) first = i;
      for (size_t j = 0; j < v; ++j) worst = std::max(worst, static_cast<double>(std::fabs(x[i * v + j] - y[i * v + j])));
    }
    std::printf("%s: first differing row %zu of %zu, max|d| %.3g\n", what, first, rows, worst);
    EXPECT_EQ(first, rows) << what;
  };
  const std::vector<float> alone = r.full_logits(a);
  {  // A and B in one forward
    auto sa = r.kv->add_sequence(), sb = r.kv->add_sequence();
    r.kv->reserve(sa, static_cast<int32_t>(a.size()));
    r.kv->reserve(sb, static_cast<int32_t>(b.size()));
    model::Batch batch;
    batch.add(sa, a, 0, model::LogitRows::All);
    batch.add(sb, b, 0, model::LogitRows::All);
    auto out = r.model->forward(batch, *r.kv);
    r.kv->remove_sequence(sa);
    r.kv->remove_sequence(sb);
    report("prompt alone vs batched with another", alone, out.logits, a.size());
  }
  std::vector<int> fours(a.size() / 4, 4);
  if (a.size() % 4) fours.push_back(static_cast<int>(a.size() % 4));
  report("prompt in one forward vs in chunks of 4", alone, r.chunked_logits(a, fours), a.size());
  std::vector<int> ones(a.size(), 1);
  report("prompt in one forward vs row by row", alone, r.chunked_logits(a, ones), a.size());
}

// Plain decoding through the engine repeats itself: the same prompts twice at each concurrency,
// and concurrency 1 against 8 (rows are batch-invariant: CudaBatchInvariance).
TEST(CudaEngine, PlainDecodingRepeatsAtEveryConcurrency) {
  if (kernels::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  auto backend = kernels::make_backend("cuda");
  auto model = model::load_model(kDemo, *backend);
  const auto prompts = demo_prompts();
  const Outputs runs[] = {run_engine(*model, prompts, nullptr, 8, 0), run_engine(*model, prompts, nullptr, 8, 0),
                          run_engine(*model, prompts, nullptr, 1, 0), run_engine(*model, prompts, nullptr, 1, 0)};
  const char* names[] = {"c8 first", "c8 second", "c1 first", "c1 second"};
  for (int x = 0; x < 4; ++x)
    for (int y = x + 1; y < 4; ++y)
      for (size_t i = 0; i < prompts.size(); ++i) {
        const auto& a = runs[x].tokens[i];
        const auto& b = runs[y].tokens[i];
        if (a == b) continue;
        const auto at = std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin();
        ADD_FAILURE() << names[x] << " vs " << names[y] << ": request " << i << " differs at token " << at;
      }
}

TEST(CudaEngine, OneRequestRepeats) {
  if (kernels::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  auto backend = kernels::make_backend("cuda");
  auto model = model::load_model(kDemo, *backend);
  const std::vector<std::vector<int32_t>> prompts = {demo_prompts()[0]};
  const Outputs a = run_engine(*model, prompts, nullptr, 1, 0);
  const Outputs b = run_engine(*model, prompts, nullptr, 1, 0);
  EXPECT_EQ(a.tokens, b.tokens);
}

TEST(CudaEngine, OneRequestRepeatsWithoutOverlappedSteps) {
  if (kernels::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  auto backend = kernels::make_backend("cuda");
  auto model = model::load_model(kDemo, *backend);
  const std::vector<std::vector<int32_t>> prompts = {demo_prompts()[0]};
  const auto off = engine::EngineConfig::Overlap::Off;
  const Outputs a = run_engine(*model, prompts, nullptr, 1, 0, 7, off);
  const Outputs b = run_engine(*model, prompts, nullptr, 1, 0, 7, off);
  EXPECT_EQ(a.tokens, b.tokens);
  const Outputs c = run_engine(*model, demo_prompts(), nullptr, 8, 0, 7, off);
  const Outputs d = run_engine(*model, demo_prompts(), nullptr, 1, 0, 7, off);
  EXPECT_EQ(c.tokens, d.tokens) << "concurrency 8 vs 1, no overlap";
}

TEST(CudaSpeculation, PartsOfSpeculationKeepPlainOutput) {
  if (kernels::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  auto backend = kernels::make_backend("cuda");
  auto model = model::load_model(kDemo, *backend);
  const auto prompts = demo_prompts();
  const Outputs plain = run_engine(*model, prompts, nullptr, 8, 0);
  const Outputs plain1 = run_engine(*model, prompts, nullptr, 1, 0);
  EXPECT_EQ(plain1.tokens, plain.tokens) << "plain decoding, concurrency 1 vs 8";
  for (const std::vector<int32_t>& layers : {std::vector<int32_t>{}, std::vector<int32_t>{1, 3}}) {
    HiddenOnlyDrafter hidden(layers);
    const Outputs h = run_engine(*model, prompts, &hidden, 1, 0, 3);
    EXPECT_EQ(h.tokens, plain.tokens) << "hidden capture of " << layers.size() << " named layers, no drafts";
  }
  std::vector<std::vector<int32_t>> continuations;
  for (size_t i = 0; i < prompts.size(); ++i) {
    continuations.push_back(prompts[i]);
    continuations.back().insert(continuations.back().end(), plain.tokens[i].begin(), plain.tokens[i].end());
  }
  FixedDrafter fixed(continuations);
  expect_lossless(*model, fixed, "right drafts", {{1, 0}, {8, 0}}, 3);
  FixedDrafter wrong({});
  const Outputs w = run_engine(*model, prompts, &wrong, 1, 0, 3);
  EXPECT_EQ(w.tokens, plain.tokens) << "wrong drafts";
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

// Seeded sampling on the device: plain steps draw on the GPU with the uniform of each position
// (overlapped steps included), verification draws on the host with the same uniform, so a
// seeded request's text is the same with every drafter, chains and trees, alone and batched.
TEST(CudaSpeculation, SeededSampledOutputEqualsPlainSamplingForEachDrafter) {
  if (kernels::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  auto backend = kernels::make_backend("cuda");
  auto model = model::load_model(kDemo, *backend);
  const auto prompts = demo_prompts();
  engine::SamplingParams sampled;
  sampled.temperature = 0.8f;
  sampled.top_p = 0.95f;
  sampled.seed = 1000;
  const auto off = engine::EngineConfig::Overlap::Off, on = engine::EngineConfig::Overlap::On;
  const Outputs plain = run_engine(*model, prompts, nullptr, 1, 0, 7, off, &sampled);
  const Outputs overlapped = run_engine(*model, prompts, nullptr, 8, 0, 7, on, &sampled);
  EXPECT_EQ(overlapped.tokens, plain.tokens) << "plain sampling, concurrency 8 overlapped vs 1";
  EXPECT_GT(overlapped.stats.overlapped_steps, 0u);
  auto ngram = spec::make_ngram_drafter({});
  auto draft = spec::make_draft_model_drafter(kDemo + "/drafter", kDemo, *model, *backend);
  auto mtp = spec::make_mtp_drafter(model::MtpHead::load(kDemo, model->config(), *backend), *backend);
  auto dflash = spec::make_dflash_drafter(
      model::DFlashHead::load(kDemo + "/dflash", kDemo, model->config(), *backend), *backend);
  const std::vector<std::pair<spec::Drafter*, const char*>> drafters = {
      {ngram.get(), "prompt lookup"}, {draft.get(), "draft model"}, {mtp.get(), "MTP"}, {dflash.get(), "DFlash"}};
  for (const auto& [drafter, name] : drafters)
    for (const auto& [concurrent, nodes] : std::vector<std::pair<int32_t, int32_t>>{{1, 0}, {8, 0}, {8, 12}}) {
      const Outputs spec = run_engine(*model, prompts, drafter, concurrent, nodes, 7, engine::EngineConfig::Overlap::Auto,
                                      &sampled);
      EXPECT_EQ(spec.tokens, plain.tokens) << name << ", concurrency " << concurrent << ", tree nodes " << nodes;
      EXPECT_GT(spec.stats.spec_accepted_tokens, 0u) << name;
    }
}

}  // namespace
}  // namespace tachyon::testing
