// Speculation under a grammar: drafts the grammar forbids are cut (chains at the first such
// token, trees by subtree), and verification with the grammar's masks gives what constrained
// decoding without speculation gives: the same tokens at temperature 0 for every draft, and
// (chi-square) the masked target distribution above it, which verification without the masks
// visibly does not.
#include "spec/grammar_drafts.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>

#include "chi_square.h"
#include "spec/verify.h"

namespace tachyon::spec {
namespace {

using sampling::Grammar;
using sampling::TokenConstraint;
using sampling::TokenVocabulary;

// A JSON-ish vocabulary; id 8 is an end id (no bytes: allowed only once the object is complete).
const std::vector<std::string> kTokens = {"{", "}", " ", "\"", "a", "{\"", ":", "1", ""};
enum : int32_t { kOpen, kClose, kSpace, kQuote, kA, kOpenQuote, kColon, kOne, kEnd };
constexpr int32_t kVocab = 9;

std::unique_ptr<TokenConstraint> json_constraint() {
  static const auto vocab = std::make_shared<const TokenVocabulary>(kTokens);
  static const auto grammar = std::make_shared<const Grammar>(Grammar::json_object());
  return std::make_unique<TokenConstraint>(grammar, vocab, std::vector<int32_t>{kEnd});
}

std::vector<bool> allowed_now(TokenConstraint& c) {
  std::vector<bool> out;
  for (int32_t t = 0; t < kVocab; ++t) out.push_back(c.is_allowed(t));
  return out;
}

TEST(GrammarDrafts, AChainEndsAtItsFirstForbiddenToken) {
  auto c = json_constraint();
  ASSERT_TRUE(c->accept(kOpen));  // inside an object: '"', '}' or whitespace next
  const auto before = allowed_now(*c);
  auto pruned = prune_to_grammar(DraftTree::chain({kQuote, kA, kQuote, kA, kClose}), *c);
  EXPECT_EQ(pruned.tokens, (std::vector<int32_t>{kQuote, kA, kQuote}));  // a key needs ':' after it, not 'a'
  EXPECT_TRUE(pruned.is_chain());
  EXPECT_TRUE(prune_to_grammar(DraftTree::chain({kA, kQuote}), *c).tokens.empty());  // forbidden at once
  EXPECT_EQ(prune_to_grammar(DraftTree::chain({kClose, kEnd}), *c).tokens, (std::vector<int32_t>{kClose, kEnd}));
  EXPECT_EQ(allowed_now(*c), before) << "the grammar is left in its state";
  ASSERT_TRUE(c->accept(kQuote));  // and still advances from there
}

// A model drafter's levels under the grammar: best if allowed, else the runner-up (swapped
// in, with its probability), else the chain ends; the grammar is back in its state after.
TEST(GrammarDrafts, LevelWalkTakesTheBestAllowedOfTheTopTwo) {
  auto c = json_constraint();
  const auto before = allowed_now(*c);
  {
    GrammarLevelWalk walk(*c);
    LevelChoice first{kA, kOpen, 0.6f, 0.3f};  // 'a' cannot start the object: '{' stands in
    ASSERT_TRUE(walk.pick(first));
    EXPECT_EQ(first.best, kOpen);
    EXPECT_EQ(first.second, kA);
    EXPECT_FLOAT_EQ(first.p_best, 0.3f);
    LevelChoice second{kQuote, kOne, 0.5f, 0.2f};  // allowed best stays
    ASSERT_TRUE(walk.pick(second));
    EXPECT_EQ(second.best, kQuote);
    LevelChoice third{kA, kColon, 0.5f, 0.2f};  // key text
    ASSERT_TRUE(walk.pick(third));
    EXPECT_EQ(third.best, kA);
    LevelChoice stuck{kEnd, -1, 0.9f, 0.f};  // the end id before the object closes, no runner-up
    EXPECT_FALSE(walk.pick(stuck));
    EXPECT_EQ(walk.runner_ups_taken(), 1);
  }
  EXPECT_EQ(allowed_now(*c), before) << "the grammar is left in its state";
}

TEST(GrammarDrafts, ATreeLosesForbiddenNodesWithTheirSubtrees) {
  auto c = json_constraint();
  // Root children: 'a' (forbidden before '{', with a child), '{"' (allowed), '{' (allowed).
  DraftTree tree;
  const int32_t a = tree.add(0, kA);              // 1: forbidden
  tree.add(a, kQuote);                            // 2: under a forbidden node
  const int32_t open_quote = tree.add(0, kOpenQuote);  // 3
  tree.add(open_quote, kA);                       // 4: key text
  tree.add(open_quote, kClose);                   // 5: '}' inside a key is key text too
  const int32_t open = tree.add(0, kOpen);        // 6
  tree.add(open, kColon);                         // 7: forbidden after '{'
  tree.add(open, kClose);                         // 8
  const auto pruned = prune_to_grammar(tree, *c);
  EXPECT_EQ(pruned.tokens, (std::vector<int32_t>{kOpenQuote, kA, kClose, kOpen, kClose}));
  EXPECT_EQ(pruned.parents, (std::vector<int32_t>{0, 1, 1, 0, 4}));
  EXPECT_EQ(pruned.child(0, kA), -1);
}

// Logits rows of a fixed target: row i's logits depend on i only. Unmasked, row 0 prefers 'a'
// (forbidden before '{') and row 1 prefers ':' (forbidden after '{').
const std::vector<std::vector<float>> kRows = {
    {1.2f, 0.3f, 0.1f, 0.4f, 2.5f, 0.9f, 0.6f, 0.2f, 0.0f},
    {0.2f, 1.1f, 0.7f, 1.0f, 0.8f, 0.1f, 2.2f, 0.5f, 0.3f},
    {0.4f, 0.8f, 0.6f, 1.3f, 1.2f, 0.2f, 1.9f, 1.0f, 0.9f},
};
LogitsRow rows() {
  return [](size_t i) { return std::span<const float>(kRows[i]); };
}

std::vector<float> masked(TokenConstraint& c, size_t row) {
  std::vector<float> l = kRows[row];
  c.mask_logits(l);
  return l;
}

// Constrained greedy decoding without speculation: mask row i with the state so far, argmax.
std::vector<int32_t> constrained_greedy(size_t n) {
  auto c = json_constraint();
  std::vector<int32_t> out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(sampling::argmax(masked(*c, i)));
    c->accept(out.back());
  }
  return out;
}

TEST(GrammarVerify, GreedyChainsGiveConstrainedGreedyTokensForEveryDraft) {
  sampling::SamplingParams p;
  p.temperature = 0;
  sampling::Sampler s(p);
  const auto expected = constrained_greedy(3);
  ASSERT_NE(expected[0], kA) << "the mask must matter for this test";
  for (int32_t a = 0; a < kVocab; ++a)
    for (int32_t b = 0; b < kVocab; ++b) {
      auto c = json_constraint();
      const std::vector<int32_t> drafts = {a, b};
      const auto r = verify_chain(drafts, rows(), s, {}, {}, c.get());
      int32_t matching = 0;
      while (matching < 2 && drafts[matching] == expected[matching]) ++matching;
      EXPECT_EQ(r.num_accepted, matching) << a << "," << b;
      EXPECT_EQ(r.tokens, std::vector<int32_t>(expected.begin(), expected.begin() + matching + 1)) << a << "," << b;
      EXPECT_TRUE(c->is_allowed(expected[0])) << "the grammar is left in its state";
      EXPECT_FALSE(r.grammar_stuck);
    }
}

TEST(GrammarVerify, GreedyTreesFollowTheConstrainedBranch) {
  sampling::SamplingParams p;
  p.temperature = 0;
  const auto expected = constrained_greedy(3);
  // The unmasked favourites first, then the constrained path as a later branch.
  DraftTree tree;
  const int32_t a = tree.add(0, kA);
  tree.add(a, kColon);
  const int32_t first = tree.add(0, expected[0]);
  tree.add(first, kColon);
  tree.add(first, expected[1]);
  // Node n's row is its depth's (the target's logits depend on the position only).
  const LogitsRow by_depth = [&](size_t node) {
    size_t depth = 0;
    for (size_t n = node; n > 0; n = static_cast<size_t>(tree.parents[n - 1])) ++depth;
    return std::span<const float>(kRows[depth]);
  };
  auto c = json_constraint();
  const auto r = verify_tree(tree, by_depth, sampling::Sampler(p), {}, {}, c.get());
  EXPECT_EQ(r.tokens, expected);
  EXPECT_EQ(r.num_accepted, 2);
  EXPECT_EQ(r.nodes, (std::vector<int32_t>{first, tree.child(first, expected[1])}));
  // Without the grammar the tree walk takes the unmasked favourites.
  EXPECT_EQ(verify_tree(tree, by_depth, sampling::Sampler(p), {}, {}).tokens, (std::vector<int32_t>{kA, kColon, kColon}));
}

TEST(GrammarVerify, AGrammarThatAllowsNothingEndsVerification) {
  sampling::SamplingParams p;
  p.temperature = 0;
  sampling::Sampler s(p);
  // A vocabulary with no token that can open an object.
  const auto vocab = std::make_shared<const TokenVocabulary>(std::vector<std::string>{"a", "}", ""});
  TokenConstraint c(std::make_shared<const Grammar>(Grammar::json_object()), vocab, {2});
  const std::vector<std::vector<float>> r3 = {{1.f, 0.f, 0.f}, {1.f, 0.f, 0.f}};
  const auto r = verify_chain(std::vector<int32_t>{0}, [&](size_t i) { return std::span<const float>(r3[i]); }, s, {},
                              {}, &c);
  EXPECT_TRUE(r.grammar_stuck);
  EXPECT_TRUE(r.tokens.empty());
}

std::vector<double> softmax(const std::vector<float>& l) {
  std::vector<double> p(l.size());
  const double mx = *std::max_element(l.begin(), l.end());
  double s = 0;
  for (size_t i = 0; i < l.size(); ++i) s += (p[i] = std::isinf(l[i]) ? 0.0 : std::exp(l[i] - mx));
  for (auto& x : p) x /= s;
  return p;
}

// Drafts {d1, d2} verified at temperature 1, many times (one seed each): the first emitted token's counts
// against row 0 masked from the start, the second's (where the first was d1) against row 1
// masked after d1.
void check_distribution(int32_t d1, int32_t d2, bool with_grammar, double* p_first, double* p_second) {
  sampling::SamplingParams params;
  params.temperature = 1.0f;
  std::vector<long> first(kVocab, 0), second(kVocab, 0);
  auto c = json_constraint();
  for (int i = 0; i < 40000; ++i) {
    params.seed = 99 + i;  // each verification draws position 0 and 1 of its own seed
    const sampling::Sampler sampler(params);
    const auto r = verify_chain(std::vector<int32_t>{d1, d2}, rows(), sampler, {}, {},
                                with_grammar ? c.get() : nullptr);
    ++first[r.tokens[0]];
    if (r.tokens[0] == d1 && r.tokens.size() > 1) ++second[r.tokens[1]];
  }
  auto expect = json_constraint();
  *p_first = testing::goodness_of_fit_p(first, softmax(masked(*expect, 0)));
  if (!expect->accept(d1)) return;
  *p_second = testing::goodness_of_fit_p(second, softmax(masked(*expect, 1)));
}

TEST(GrammarVerify, SampledVerificationGivesTheMaskedTargetDistribution) {
  double p1 = 0, p2 = 0;
  check_distribution(kOpen, kQuote, true, &p1, &p2);  // allowed drafts
  EXPECT_GT(p1, 0.01);
  EXPECT_GT(p2, 0.01);
  check_distribution(kA, kColon, true, &p1, &p2);  // a forbidden first draft (not pruned): never emitted
  EXPECT_GT(p1, 0.01);
}

TEST(GrammarVerify, VerificationWithoutTheMasksIsDetected) {
  double p1 = 0, p2 = 0;
  check_distribution(kOpen, kQuote, false, &p1, &p2);
  EXPECT_LT(p1, 1e-6);  // forbidden tokens ('a') come out
}

}  // namespace
}  // namespace tachyon::spec
