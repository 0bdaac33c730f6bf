// PFlash's scorers on token-level needles (tests/unit/engine/pflash_needles.h): a needle that
// repeats the question's words (lexical) and one that paraphrases it, at depths 0.05, 0.5 and
// 0.95 of a ~3k-token prompt compressed to 20%, must survive compression; a negative control
// (the question's answer is nowhere in the prompt) must make no block stand out.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "engine/pflash.h"
#include "engine/pflash_attention.h"
#include "engine/pflash_lexical.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "pflash_needles.h"

namespace tachyon::engine {
namespace {

using pflash_test::needle_prompt;
using pflash_test::NeedlePrompt;

const std::string kDemo = std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo";
const std::string kQuestion = "What is the access code for the Zephyr vault? Answer with the code only.";
const std::string kLexicalNeedle = "The access code for the Zephyr vault is 4158-GLACIER.";
const std::string kParaphrasedNeedle = "To open the Zephyr strongroom, type the combination 4158-GLACIER.";
constexpr int32_t kFiller = 3000;

struct Fixture {
  tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_model_dir(kDemo);
  std::unique_ptr<kernels::Backend> backend = kernels::make_backend("cpu");
  AttentionScorer attention{model::load_model(kDemo + "/drafter", *backend)};
  LexicalScorer lexical;
};
Fixture& fixture() {
  static Fixture f;
  return f;
}

bool needle_kept(const NeedlePrompt& p, const PflashPlan& plan) {
  for (int32_t i = p.needle_begin; i < p.needle_end; ++i)
    if (!std::binary_search(plan.kept.begin(), plan.kept.end(), i)) return false;
  return true;
}

PflashConfig lexical_config() {
  // The lexical scorer's own tail (2048) leaves no middle at 20% of 3k tokens (see the refusal
  // test): a tail that holds the question, and a budget that keeps a few of its 128-token blocks.
  return {.mode = PflashMode::Always, .keep_ratio = 0.25, .sink = 64, .tail = 128};
}
PflashConfig attention_config() { return {.mode = PflashMode::Always, .keep_ratio = 0.2}; }

class NeedleDepth : public ::testing::TestWithParam<double> {};

TEST_P(NeedleDepth, Lexical_scorer_keeps_a_needle_that_repeats_the_question) {
  Fixture& f = fixture();
  const NeedlePrompt p = needle_prompt(f.tok, kFiller, kLexicalNeedle, GetParam(), kQuestion);
  const PflashPlan plan = plan_compression(p.tokens, lexical_config(), f.lexical);
  ASSERT_TRUE(plan.compressed()) << plan.refused;
  EXPECT_LE(plan.kept.size(), p.tokens.size() / 4);
  EXPECT_TRUE(needle_kept(p, plan)) << "needle at tokens [" << p.needle_begin << ", " << p.needle_end << ")";
}

TEST_P(NeedleDepth, Attention_scorer_keeps_a_repeated_needle) {
  Fixture& f = fixture();
  const NeedlePrompt p = needle_prompt(f.tok, kFiller, kLexicalNeedle, GetParam(), kQuestion);
  const PflashPlan plan = plan_compression(p.tokens, attention_config(), f.attention);
  ASSERT_TRUE(plan.compressed()) << plan.refused;
  EXPECT_LE(plan.kept.size(), p.tokens.size() / 5);
  EXPECT_TRUE(needle_kept(p, plan)) << "needle at tokens [" << p.needle_begin << ", " << p.needle_end << ")";
}

TEST_P(NeedleDepth, Attention_scorer_keeps_a_paraphrased_needle) {
  Fixture& f = fixture();
  const NeedlePrompt p = needle_prompt(f.tok, kFiller, kParaphrasedNeedle, GetParam(), kQuestion);
  const PflashPlan plan = plan_compression(p.tokens, attention_config(), f.attention);
  ASSERT_TRUE(plan.compressed()) << plan.refused;
  EXPECT_LE(plan.kept.size(), p.tokens.size() / 5);
  EXPECT_TRUE(needle_kept(p, plan)) << "needle at tokens [" << p.needle_begin << ", " << p.needle_end << ")";
}

INSTANTIATE_TEST_SUITE_P(Depths, NeedleDepth, ::testing::Values(0.05, 0.5, 0.95));

// At 3.6k tokens the middle splits into 512-token pieces with one short last piece, and the
// question's window begins with filler rows: before the scorer balanced its pieces, weighted the
// window's rows towards its end and carried attention forward over a sentence, these needles
// (Marigold, Cobalt and Juniper in pflash_bench) were dropped.
TEST(PflashNeedles, Attention_scorer_keeps_paraphrased_needles_at_3600_tokens) {
  Fixture& f = fixture();
  const std::vector<std::pair<std::string, double>> needles = {
      {"Marigold", 0.05}, {"Cobalt", 0.25}, {"Juniper", 0.5}};
  for (const auto& [name, depth] : needles) {
    const NeedlePrompt p =
        needle_prompt(f.tok, 3600, "To open the " + name + " strongroom, type the combination 4158-GLACIER.", depth,
                      "What is the access code for the " + name + " vault? Answer with the code only.");
    const PflashPlan plan = plan_compression(p.tokens, attention_config(), f.attention);
    ASSERT_TRUE(plan.compressed()) << plan.refused;
    EXPECT_TRUE(needle_kept(p, plan)) << name << " at depth " << depth;
  }
}

// Negative control: the same needles, but the question asks about something else. Neither
// scorer may keep the needle then (at depth 0.95 it is the block next to the question, which
// both keep for its recency alone, so that depth says nothing here).
TEST(PflashNeedles, Negative_control_keeps_no_needle_for_an_unrelated_question) {
  Fixture& f = fixture();
  const std::string unrelated = "Which city did the careful engineer visit in 1911?";
  for (double depth : {0.05, 0.5}) {
    for (const std::string& needle : {kLexicalNeedle, kParaphrasedNeedle}) {
      const NeedlePrompt p = needle_prompt(f.tok, kFiller, needle, depth, unrelated);
      const PflashPlan lexical = plan_compression(p.tokens, lexical_config(), f.lexical);
      const PflashPlan attention = plan_compression(p.tokens, attention_config(), f.attention);
      ASSERT_TRUE(lexical.compressed() && attention.compressed());
      EXPECT_FALSE(needle_kept(p, lexical)) << "lexical, depth " << depth << ": " << needle;
      EXPECT_FALSE(needle_kept(p, attention)) << "attention, depth " << depth << ": " << needle;
    }
  }
}

// The lexical scorer's own sink (256) and tail (2048) leave no middle at 20% of 3k tokens: it
// refuses, and says why.
TEST(PflashNeedles, Lexical_defaults_refuse_when_the_budget_leaves_no_middle) {
  Fixture& f = fixture();
  const NeedlePrompt p = needle_prompt(f.tok, kFiller, kLexicalNeedle, 0.5, kQuestion);
  const PflashPlan plan = plan_compression(p.tokens, {.mode = PflashMode::Always, .keep_ratio = 0.2}, f.lexical);
  EXPECT_FALSE(plan.compressed());
  EXPECT_NE(plan.refused.find("no middle"), std::string::npos) << plan.refused;
  EXPECT_EQ(plan.shape.sink, 256);
  EXPECT_EQ(plan.shape.tail, 2048);
  EXPECT_EQ(plan.shape.block, 128);
}

}  // namespace
}  // namespace tachyon::engine
