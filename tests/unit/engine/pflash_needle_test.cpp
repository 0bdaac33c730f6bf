// PFlash's scorers on token-level needles (tests/unit/engine/pflash_needles.h): a needle that
// repeats the question's words (lexical) and one that paraphrases it, at depths 0.05, 0.5 and
// 0.95 of a ~3k-token prompt compressed to 20%, must survive compression; a negative control
// (the question's answer is nowhere in the prompt) must make no block stand out.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/error.h"
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

// The filler just before the question recurs in the middle; the question window's rows that
// copy it put nearly all their probability on the same token pairs in every 512-token piece,
// where one softmax over the whole prompt would share it among all the copies. Before the peaks
// were weighted by the pair's rarity and its share of copies in the piece, these needles lost
// to that filler (Brightwater: ranked 10th-15th).
TEST(PflashNeedles, Attention_scorer_keeps_needles_against_copied_filler) {
  Fixture& f = fixture();
  const struct {
    int32_t filler;
    const char *needle, *question;
    double depth;
  } cases[] = {
      {2500, "The Brightwater festival was postponed until the ninth of October.",
       "When will the Brightwater celebration take place? Answer briefly.", 0.85},
      {2750, "The Brightwater festival was postponed until the ninth of October.",
       "When will the Brightwater celebration take place? Answer briefly.", 0.85},
  };
  for (const auto& c : cases) {
    const NeedlePrompt p = needle_prompt(f.tok, c.filler, c.needle, c.depth, c.question);
    const PflashPlan plan = plan_compression(p.tokens, attention_config(), f.attention);
    ASSERT_TRUE(plan.compressed()) << plan.refused;
    EXPECT_TRUE(needle_kept(p, plan)) << c.filler << " tokens: " << c.needle;
  }
}

// The cheap read (AttentionScorerOptions::layers, read_window): the forward stops after the
// layers it probes, and a read window narrows what the prompt's rows attend to while the probe's
// query rows still see every key.
TEST(PflashCheapRead, The_forward_stops_after_the_probed_layers) {
  Fixture& f = fixture();
  const NeedlePrompt p = needle_prompt(f.tok, kFiller, kParaphrasedNeedle, 0.5, kQuestion);
  AttentionScorer first_layer(model::load_model(kDemo + "/drafter", *f.backend), {.layers = 1});
  ASSERT_TRUE(plan_compression(p.tokens, attention_config(), first_layer).compressed());
  EXPECT_EQ(first_layer.last_layers_run(), 1);
  ASSERT_TRUE(plan_compression(p.tokens, attention_config(), f.attention).compressed());
  EXPECT_EQ(f.attention.last_layers_run(), 2);
  EXPECT_NE(first_layer.last_token_peak(), f.attention.last_token_peak());  // layer 1's probe is gone
  EXPECT_THROW(AttentionScorer(model::load_model(kDemo + "/drafter", *f.backend), {.layers = 1, .first_layer = 1}),
               Error);
  EXPECT_THROW(AttentionScorer(model::load_model(kDemo + "/drafter", *f.backend), {.read_window = -1}), Error);
}

TEST(PflashCheapRead, A_read_window_engages_and_keeps_the_needle) {
  Fixture& f = fixture();
  const NeedlePrompt p = needle_prompt(f.tok, kFiller, kParaphrasedNeedle, 0.5, kQuestion);
  auto scorer = [&](int32_t window) {
    return AttentionScorer(model::load_model(kDemo + "/drafter", *f.backend), {.read_window = window});
  };
  // Pieces of at most 512 tokens (the default chunk): a 512-key window changes nothing there; a
  // 16-key one changes what layer 1's rows are made of (not a rounding difference).
  AttentionScorer full = scorer(0), wide = scorer(AttentionScorerOptions{}.chunk), narrow = scorer(16);
  for (AttentionScorer* s : {&full, &wide, &narrow}) ASSERT_TRUE(plan_compression(p.tokens, attention_config(), *s).compressed());
  EXPECT_EQ(wide.last_token_peak(), full.last_token_peak());
  float moved = 0.f, largest = 0.f;
  for (size_t i = 0; i < full.last_token_peak().size(); ++i) {
    moved = std::max(moved, std::abs(narrow.last_token_peak()[i] - full.last_token_peak()[i]));
    largest = std::max(largest, full.last_token_peak()[i]);
  }
  EXPECT_GT(moved, 0.2f * largest) << "largest peak " << largest;
  // The default read is windowed (NeedleDepth's needles are kept with it); a 128-key window
  // keeps this one too.
  EXPECT_GT(AttentionScorerOptions{}.read_window, 0);
  AttentionScorer window_128 = scorer(128);
  const PflashPlan plan = plan_compression(p.tokens, attention_config(), window_128);
  ASSERT_TRUE(plan.compressed()) << plan.refused;
  EXPECT_TRUE(needle_kept(p, plan));
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
