// Speculation is lossless at temperature 0 (DESIGN.md "Speculation"), and a seeded sampled
// request's text is plain sampling's (SeededSampling* below): with every drafter, alone
// and in a concurrent batch, as chains and as trees, the engine generates exactly the tokens of
// plain decoding. The plain outputs are stored (tests/fixtures/spec/demo_greedy.json), so each
// drafter's case is its own test that ctest runs in parallel with the others;
// PlainEngineReproducesTheStoredOutputs keeps the file honest. After a deliberate change of the
// model's numerics, rewrite it (and review the diff) with
//   TACHYON_WRITE_GOLDEN=1 build/tests/unit/engine/spec_equivalence_tests --gtest_filter='PlainEngine*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "demo_runs.h"
#include "model/dflash_head.h"
#include "model/mtp_head.h"
#include "spec/dflash.h"
#include "spec/draft_model.h"
#include "spec/merged_drafter.h"
#include "spec/mtp.h"
#include "spec/ngram.h"
#include "spec/suffix.h"

namespace tachyon::engine {
namespace {

using namespace testing_demo;

constexpr int32_t kGreedyTokens = 128, kPenaltyTokens = 64;
// Requests alone (one at a time) run the first half of each stored continuation: greedy outputs
// are prefixes of longer ones, and the batched cases cover all 128 tokens (CI's time budget).
constexpr int32_t kAloneTokens = 64;

std::vector<std::vector<int32_t>> first_tokens(std::vector<std::vector<int32_t>> outputs, int32_t n) {
  for (auto& o : outputs) o.resize(std::min(o.size(), static_cast<size_t>(n)));
  return outputs;
}
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
  const int32_t tokens = c.max_concurrent == 1 ? kAloneTokens : kGreedyTokens;
  const auto plain = first_tokens(stored_plain_outputs("greedy", ps.size(), kGreedyTokens), tokens);
  auto drafter = make_drafter(c.drafter);
  EngineConfig config{.max_concurrent = c.max_concurrent, .num_blocks = 1024};
  config.drafter = drafter.get();
  config.max_tree_nodes = c.max_tree_nodes;
  if (std::string(c.drafter) == "dflash") config.num_speculative_tokens = 7;  // its block of 8
  SpecUsage usage;
  EngineStats stats;
  const auto outs = run_all(ps, config, tokens, &usage, &stats);
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

// The drafter choice: every drafter held at once, each request drafting with the one the engine
// chooses for its kind (spec/drafter_choice.h). Token-identical to plain decoding, alone and
// batched (requests of different drafters share steps, DFlash's and MTP's hidden layers too); and
// it engages: at least two drafters were chosen across the mixed prompts and each accepted
// drafts. Gates off: whether a gate stops a drafter depends on measured seconds (in a batch of
// 16 on the CPU the payoff gate rightly stops the model drafters), and a test asserts no timing.
// Each request's usage is its last delivery's (RequestStream merges deliveries the test has not
// collected yet: their speculation totals too).
class DrafterChoiceEquivalence : public ::testing::TestWithParam<int32_t> {};

TEST_P(DrafterChoiceEquivalence, GreedyOutputEqualsPlainDecodingWithSeveralDraftersChosen) {
  const int32_t max_concurrent = GetParam();
  const int32_t tokens = max_concurrent == 1 ? kAloneTokens : kGreedyTokens;
  const auto ps = prompts();
  const auto plain = first_tokens(stored_plain_outputs("greedy", ps.size(), kGreedyTokens), tokens);
  std::vector<std::unique_ptr<spec::Drafter>> drafters;
  EngineConfig config{.max_concurrent = max_concurrent, .num_blocks = 1024};
  config.gates = false;
  for (const char* name : {"ngram", "suffix", "draft", "mtp", "dflash"}) {
    drafters.push_back(make_drafter(name));
    const std::string n = name;
    config.drafters.push_back({drafters.back().get(), n == "ngram" || n == "suffix", n == "dflash" ? 7 : 4});
  }
  // The merged drafter over prompt lookup, the draft model and MTP (its hidden states pass through).
  drafters.push_back(std::make_unique<spec::MergedDrafter>(std::vector<spec::MergedMember>{
      {drafters[0].get(), false}, {drafters[2].get(), true}, {drafters[3].get(), true}}));
  config.drafters.push_back({drafters.back().get(), false, 4});
  std::vector<SpecUsage> usages;
  EngineStats stats;
  const auto outs = run_all(ps, config, tokens, nullptr, &stats, 1.f, &usages);
  for (size_t i = 0; i < ps.size(); ++i) ASSERT_EQ(outs[i], plain[i]) << "prompt " << i;
  std::map<std::string, SpecUsage> by_drafter;
  for (const SpecUsage& u : usages) {
    if (u.method.empty()) continue;
    SpecUsage& total = by_drafter[u.method];
    total.num_drafted += u.num_drafted;
    total.num_accepted += u.num_accepted;
    total.num_steps += u.num_steps;
    EXPECT_FALSE(u.choice.empty()) << u.method << ": the choice says why";
  }
  EXPECT_GE(by_drafter.size(), 2u) << "the choice never changed drafter";
  for (const auto& [name, u] : by_drafter) {
    EXPECT_GT(u.num_accepted, 0) << name << " was chosen but never accepted a draft";
    std::printf("concurrency %d: %s: %d drafted, %d accepted over %d steps\n", max_concurrent, name.c_str(),
                u.num_drafted, u.num_accepted, u.num_steps);
  }
  EXPECT_FALSE(stats.drafter_figures.empty()) << "no live figure reached the stats";
}

INSTANTIATE_TEST_SUITE_P(AloneAndBatched, DrafterChoiceEquivalence, ::testing::Values(1, 16),
                         [](const ::testing::TestParamInfo<int32_t>& info) {
                           return std::string(info.param == 1 ? "alone" : "batched");
                         });

// The merged drafter (spec/merged_drafter.h): prompt lookup's and the draft model's candidates in
// one tree, verified in one forward. Token-identical to plain decoding alone and batched, and it
// engages: drafts accepted, trees verified, and trees holding nodes of both drafters. Gates off,
// as above (whether they stop it depends on measured seconds).
class MergedEquivalence : public ::testing::TestWithParam<int32_t> {};

TEST_P(MergedEquivalence, GreedyOutputEqualsPlainDecodingWithTreesOfTwoDrafters) {
  const int32_t max_concurrent = GetParam();
  const auto ps = prompts();
  const auto plain = stored_plain_outputs("greedy", ps.size(), kGreedyTokens);
  auto lookup = make_drafter("ngram"), draft = make_drafter("draft");
  spec::MergedDrafter merged({{lookup.get(), false}, {draft.get(), true}});
  EngineConfig config{.max_concurrent = max_concurrent, .num_blocks = 1024};
  config.drafter = &merged;
  config.gates = false;
  SpecUsage usage;
  EngineStats stats;
  const auto outs = run_all(ps, config, kGreedyTokens, &usage, &stats);
  for (size_t i = 0; i < ps.size(); ++i) ASSERT_EQ(outs[i], plain[i]) << "prompt " << i;
  const spec::MergedCounters& c = merged.counters();
  EXPECT_GT(usage.num_accepted, 0) << "speculation never accepted anything";
  EXPECT_GT(stats.spec_tree_steps, 0u) << "no step verified a tree";
  EXPECT_GT(c.multi_source_trees, 0u) << "no tree held nodes of both drafters";
  EXPECT_GT(c.nodes[0], 0u);
  EXPECT_GT(c.nodes[1], 0u);
  std::printf("merged, concurrency %d: %llu trees (%llu of both drafters), ngram %llu nodes, draft %llu nodes (drafted "
              "%llu steps, skipped %llu); %d drafted, %d accepted, mean accepted length %.2f\n",
              max_concurrent, static_cast<unsigned long long>(c.trees),
              static_cast<unsigned long long>(c.multi_source_trees), static_cast<unsigned long long>(c.nodes[0]),
              static_cast<unsigned long long>(c.nodes[1]), static_cast<unsigned long long>(c.runs[1]),
              static_cast<unsigned long long>(c.skips[1]), usage.num_drafted, usage.num_accepted,
              usage.mean_accepted_length());
}

INSTANTIATE_TEST_SUITE_P(AloneAndBatched, MergedEquivalence, ::testing::Values(1, 16),
                         [](const ::testing::TestParamInfo<int32_t>& info) {
                           return std::string(info.param == 1 ? "alone" : "batched");
                         });

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

// Seeded sampling (temperature 0.8, top-p 0.95) gives the same text with or without
// speculation: each generated position's draw is keyed by (seed, position) (sampling/sampler.h),
// so verification emits plain sampling's token at every position whatever was drafted, batched,
// overlapped or chosen. With a sequential stream the drafts changed how many draws each step
// took and these outputs changed with k, the drafter and the batch.
constexpr size_t kSampledPrompts = 8;
constexpr int32_t kSampledTokens = 40;

SamplingParams seeded_sampling() {
  SamplingParams s;
  s.temperature = 0.8f;
  s.top_p = 0.95f;
  s.seed = 1000;  // prompt i: seed 1000 + i
  return s;
}

std::vector<std::vector<int32_t>> sampled_prompts() {
  auto ps = prompts();
  ps.resize(kSampledPrompts);
  return ps;
}

// The plain reference, one request at a time.
const std::vector<std::vector<int32_t>>& plain_sampled_outputs() {
  static const auto outs = [] {
    const SamplingParams s = seeded_sampling();
    return run_all(sampled_prompts(), {.max_concurrent = 1, .num_blocks = 1024}, kSampledTokens, nullptr, nullptr,
                   1.f, nullptr, &s);
  }();
  return outs;
}

TEST(SeededSampling, PlainOutputsDoNotDependOnBatchingOrOverlappedStepsAndSeedsDiffer) {
  const auto& plain = plain_sampled_outputs();
  SamplingParams s = seeded_sampling();
  EngineStats stats;
  EXPECT_EQ(run_all(sampled_prompts(), {.max_concurrent = 8, .num_blocks = 1024}, kSampledTokens, nullptr, nullptr,
                    1.f, nullptr, &s),
            plain);
  EngineConfig overlapped{.max_concurrent = 8, .num_blocks = 1024};
  overlapped.overlap_steps = EngineConfig::Overlap::On;
  EXPECT_EQ(run_all(sampled_prompts(), overlapped, kSampledTokens, nullptr, &stats, 1.f, nullptr, &s), plain);
  EXPECT_GT(stats.overlapped_steps, 0u) << "no step was issued ahead";
  // Choice i of n gets seed + i (server/choices.h): neighbouring seeds give other texts.
  s.seed = 1001;
  const auto shifted = run_all(sampled_prompts(), {.max_concurrent = 8, .num_blocks = 1024}, kSampledTokens, nullptr,
                               nullptr, 1.f, nullptr, &s);
  for (size_t i = 0; i + 1 < plain.size(); ++i) EXPECT_NE(shifted[i], plain[i + 1]) << "prompt " << i + 1;
  EXPECT_NE(shifted, plain);
}

class SeededSamplingEquivalence : public ::testing::TestWithParam<DrafterCase> {};

TEST_P(SeededSamplingEquivalence, SampledOutputEqualsPlainSampling) {
  const DrafterCase c = GetParam();
  auto drafter = make_drafter(c.drafter);
  EngineConfig config{.max_concurrent = c.max_concurrent, .num_blocks = 1024};
  config.drafter = drafter.get();
  config.max_tree_nodes = c.max_tree_nodes;
  if (std::string(c.drafter) == "dflash") config.num_speculative_tokens = 7;
  const SamplingParams s = seeded_sampling();
  SpecUsage usage;
  EngineStats stats;
  const auto outs = run_all(sampled_prompts(), config, kSampledTokens, &usage, &stats, 1.f, nullptr, &s);
  const auto& plain = plain_sampled_outputs();
  for (size_t i = 0; i < plain.size(); ++i) ASSERT_EQ(outs[i], plain[i]) << "prompt " << i;
  EXPECT_GT(usage.num_accepted, 0) << "speculation never accepted anything";
  if (c.max_tree_nodes > 0) {
    EXPECT_GT(stats.spec_tree_steps, 0u) << "no step verified a tree";
  }
  std::printf("sampled, %s, concurrency %d, tree nodes %d: %llu tree steps of %llu, %d drafted, %d accepted\n",
              c.drafter, c.max_concurrent, c.max_tree_nodes, static_cast<unsigned long long>(stats.spec_tree_steps),
              static_cast<unsigned long long>(stats.spec_steps), usage.num_drafted, usage.num_accepted);
}

INSTANTIATE_TEST_SUITE_P(EveryDrafter, SeededSamplingEquivalence,
                         ::testing::Values(DrafterCase{"ngram", 1, 0}, DrafterCase{"ngram", 8, 0},
                                           DrafterCase{"ngram", 8, 12}, DrafterCase{"suffix", 1, 0},
                                           DrafterCase{"suffix", 8, 12}, DrafterCase{"draft", 1, 0},
                                           DrafterCase{"draft", 8, 12}, DrafterCase{"mtp", 1, 0},
                                           DrafterCase{"mtp", 8, 12}, DrafterCase{"dflash", 1, 0},
                                           DrafterCase{"dflash", 8, 0}),
                         case_name);

// Every drafter held at once, each request drafting with the one the choice picks (sampled
// requests follow the choice now): still plain sampling's text.
TEST(SeededSamplingEquivalence, SampledOutputEqualsPlainSamplingWithSeveralDraftersChosen) {
  std::vector<std::unique_ptr<spec::Drafter>> drafters;
  EngineConfig config{.max_concurrent = 8, .num_blocks = 1024};
  config.gates = false;
  for (const char* name : {"ngram", "suffix", "draft", "mtp", "dflash"}) {
    drafters.push_back(make_drafter(name));
    const std::string n = name;
    config.drafters.push_back({drafters.back().get(), n == "ngram" || n == "suffix", n == "dflash" ? 7 : 4});
  }
  const SamplingParams s = seeded_sampling();
  std::vector<SpecUsage> usages;
  const auto outs = run_all(sampled_prompts(), config, kSampledTokens, nullptr, nullptr, 1.f, &usages, &s);
  EXPECT_EQ(outs, plain_sampled_outputs());
  std::set<std::string> methods;
  for (const SpecUsage& u : usages)
    if (!u.method.empty() && u.num_accepted > 0) methods.insert(u.method);
  EXPECT_GE(methods.size(), 2u) << "the choice never changed drafter for sampled requests";
}

}  // namespace
}  // namespace tachyon::engine
