// Speculation is lossless at temperature 0 (DESIGN.md "Speculation"): with every drafter, alone
// and in a concurrent batch, as chains and as trees, the engine generates exactly the tokens of
// plain decoding. The plain outputs are stored (tests/fixtures/spec/demo_greedy.json), so each
// drafter's case is its own test that ctest runs in parallel with the others;
// PlainEngineReproducesTheStoredOutputs keeps the file honest. After a deliberate change of the
// model's numerics, rewrite it (and review the diff) with
//   TACHYON_WRITE_GOLDEN=1 build/tests/unit/engine/spec_equivalence_tests --gtest_filter='PlainEngine*'
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "demo_runs.h"
#include "model/dflash_head.h"
#include "model/mtp_head.h"
#include "spec/dflash.h"
#include "spec/draft_model.h"
#include "spec/mtp.h"
#include "spec/ngram.h"
#include "spec/suffix.h"

namespace tachyon::engine {
namespace {

using namespace testing_demo;

constexpr int32_t kGreedyTokens = 128, kPenaltyTokens = 64;
constexpr size_t kPenaltyPrompts = 12;
constexpr float kPenalty = 1.3f;

TEST(PlainEngine, ReproducesTheStoredOutputs) {
  const auto ps = prompts();
  const auto greedy = run_all(ps, {.max_concurrent = 16, .num_blocks = 1024}, kGreedyTokens);
  const std::vector<std::vector<int32_t>> penalty_prompts(ps.begin(), ps.begin() + kPenaltyPrompts);
  const auto penalty =
      run_all(penalty_prompts, {.max_concurrent = 4, .num_blocks = 1024}, kPenaltyTokens, nullptr, nullptr, kPenalty);
  if (const char* write = std::getenv("TACHYON_WRITE_GOLDEN"); write && std::string(write) == "1") {
    const Json golden = {{"greedy", {{"max_tokens", kGreedyTokens}, {"outputs", greedy}}},
                         {"penalty", {{"max_tokens", kPenaltyTokens}, {"repetition_penalty", kPenalty},
                                      {"outputs", penalty}}}};
    std::filesystem::create_directories(std::filesystem::path(kGoldenPath).parent_path());
    std::ofstream(kGoldenPath) << golden.dump() << "\n";
    GTEST_SKIP() << "wrote " << kGoldenPath;
  }
  EXPECT_EQ(greedy, stored_plain_outputs("greedy", ps.size(), kGreedyTokens));
  EXPECT_EQ(penalty, stored_plain_outputs("penalty", kPenaltyPrompts, kPenaltyTokens));
}

// One drafter of each kind, made fresh for each case (the suffix drafter learns from the outputs
// of earlier requests of its run: later prompts draft from them).
std::unique_ptr<spec::Drafter> make_drafter(const std::string& name) {
  if (name == "ngram") return spec::make_ngram_drafter({});
  if (name == "suffix") return spec::make_suffix_drafter({});
  if (name == "draft") return spec::make_draft_model_drafter(kDemo + "/drafter", kDemo, *demo().model, *demo().backend);
  if (name == "dflash")
    return spec::make_dflash_drafter(
        model::DFlashHead::load(kDemo + "/dflash", kDemo, demo().model->config(), *demo().backend), *demo().backend);
  return spec::make_mtp_drafter(model::MtpHead::load(kDemo, demo().model->config(), *demo().backend), *demo().backend);
}

struct DrafterCase {
  const char* drafter;
  int32_t max_concurrent;
  int32_t max_tree_nodes;  // EngineConfig::max_tree_nodes: -1 the default (auto), 12 trees whenever possible
};

class SpeculativeEquivalence : public ::testing::TestWithParam<DrafterCase> {};

TEST_P(SpeculativeEquivalence, GreedyOutputEqualsPlainDecoding) {
  const DrafterCase c = GetParam();
  const auto ps = prompts();
  const auto plain = stored_plain_outputs("greedy", ps.size(), kGreedyTokens);
  auto drafter = make_drafter(c.drafter);
  EngineConfig config{.max_concurrent = c.max_concurrent, .num_blocks = 1024};
  config.drafter = drafter.get();
  config.max_tree_nodes = c.max_tree_nodes;
  if (std::string(c.drafter) == "dflash") config.num_speculative_tokens = 7;  // its block of 8
  SpecUsage usage;
  EngineStats stats;
  const auto outs = run_all(ps, config, kGreedyTokens, &usage, &stats);
  for (size_t i = 0; i < ps.size(); ++i) ASSERT_EQ(outs[i], plain[i]) << "prompt " << i;
  EXPECT_GT(usage.num_accepted, 0) << "speculation never accepted anything";
  if (c.max_tree_nodes > 0) {
    EXPECT_GT(stats.spec_tree_steps, 0u) << "no step verified a tree";
  }
  std::printf("%s, concurrency %d, tree nodes %d: %llu tree steps of %llu, %d drafted, %d accepted, mean accepted "
              "length %.2f\n",
              c.drafter, c.max_concurrent, c.max_tree_nodes, static_cast<unsigned long long>(stats.spec_tree_steps),
              static_cast<unsigned long long>(stats.spec_steps), usage.num_drafted, usage.num_accepted,
              usage.mean_accepted_length());
}

std::string case_name(const ::testing::TestParamInfo<DrafterCase>& info) {
  const DrafterCase& c = info.param;
  return std::string(c.drafter) + (c.max_concurrent == 1 ? "_alone" : "_batched") +
         (c.max_tree_nodes > 0 ? "_trees" : c.max_tree_nodes == 0 ? "_chains" : "_default");
}

// Model drafters' trees run batched only: the batched run covers their branching (and keeps
// the suite's time down).
INSTANTIATE_TEST_SUITE_P(EveryDrafter, SpeculativeEquivalence,
                         ::testing::Values(DrafterCase{"ngram", 1, -1}, DrafterCase{"ngram", 16, -1},
                                           DrafterCase{"suffix", 1, -1}, DrafterCase{"suffix", 16, -1},
                                           DrafterCase{"draft", 1, -1}, DrafterCase{"draft", 16, -1},
                                           DrafterCase{"mtp", 1, -1}, DrafterCase{"mtp", 16, -1},
                                           DrafterCase{"ngram", 1, 12}, DrafterCase{"ngram", 16, 12},
                                           DrafterCase{"suffix", 1, 12}, DrafterCase{"suffix", 16, 12},
                                           DrafterCase{"draft", 16, 12}, DrafterCase{"mtp", 16, 12},
                                           DrafterCase{"dflash", 1, 0}, DrafterCase{"dflash", 16, 0},
                                           DrafterCase{"dflash", 16, 12}),
                         case_name);

// Greedy with a logits processor: tree verification applies it with each branch as history.
TEST(SpeculativeEquivalenceWithPenalty, DraftTreesApplyPenaltiesAlongEachBranch) {
  auto ps = prompts();
  ps.resize(kPenaltyPrompts);
  const auto plain = stored_plain_outputs("penalty", kPenaltyPrompts, kPenaltyTokens);
  auto ngram = spec::make_ngram_drafter({});
  EngineConfig config{.max_concurrent = 4, .num_blocks = 1024};
  config.drafter = ngram.get();
  config.max_tree_nodes = 12;
  EngineStats stats;
  const auto outs = run_all(ps, config, kPenaltyTokens, nullptr, &stats, kPenalty);
  for (size_t i = 0; i < ps.size(); ++i) ASSERT_EQ(outs[i], plain[i]) << "prompt " << i;
  EXPECT_GT(stats.spec_tree_steps, 0u);
}

}  // namespace
}  // namespace tachyon::engine
