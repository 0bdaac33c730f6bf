// Speculative verification: exact at temperature 0 and, above it, plain sampling's tokens for the
// request's seed (position-keyed draws), so distribution-exact too (a chi-square test cannot
// tell it from plain sampling, and a wrong distribution is caught).
#include "spec/verify.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "chi_square.h"
#include "spec/ngram.h"
#include "spec/suffix.h"

namespace tachyon::spec {
namespace {

// Logits rows of a fixed "target": row i's distribution depends on i only.
const std::vector<std::vector<float>> kRows = {
    {2.0f, 1.5f, 0.3f, -0.5f, 0.0f, -2.0f},
    {0.1f, 2.5f, 1.0f, 0.2f, -1.0f, 0.0f},
    {1.0f, 0.0f, 1.0f, 0.5f, 0.5f, -3.0f},
};

std::vector<double> softmax(const std::vector<float>& l) {
  std::vector<double> p(l.size());
  double mx = *std::max_element(l.begin(), l.end()), s = 0;
  for (size_t i = 0; i < l.size(); ++i) s += (p[i] = std::exp(l[i] - mx));
  for (auto& x : p) x /= s;
  return p;
}

LogitsRow rows() {
  return [](size_t i) { return std::span<const float>(kRows[i]); };
}

// The argmax-ids form gives what the logits form gives for every draft chain over kRows.
TEST(Verify, GreedyFromArgmaxIdsEqualsGreedyFromLogits) {
  sampling::SamplingParams p;
  p.temperature = 0;
  sampling::Sampler s(p);
  const std::vector<int32_t> argmax = {0, 1, 0};  // of kRows (tie in row 2: lowest id)
  for (int32_t a = 0; a < 6; ++a)
    for (int32_t b = 0; b < 6; ++b) {
      const std::vector<int32_t> drafts = {a, b};
      const auto from_logits = verify_chain(drafts, rows(), s, {}, {});
      const auto from_ids = verify_chain_greedy(drafts, argmax);
      EXPECT_EQ(from_ids.tokens, from_logits.tokens) << a << "," << b;
      EXPECT_EQ(from_ids.num_accepted, from_logits.num_accepted) << a << "," << b;
    }
}

TEST(Verify, GreedyAcceptsWhileArgmaxMatchesThenCorrects) {
  sampling::SamplingParams p;
  p.temperature = 0;
  sampling::Sampler s(p);
  // argmaxes: row0 -> 0, row1 -> 1, row2 -> 0 (tie 0/2: lowest id)
  auto r = verify_chain(std::vector<int32_t>{0, 1}, rows(), s, {}, {});
  EXPECT_EQ(r.num_accepted, 2);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{0, 1, 0}));  // bonus from row 2
  r = verify_chain(std::vector<int32_t>{0, 3}, rows(), s, {}, {});
  EXPECT_EQ(r.num_accepted, 1);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{0, 1}));  // correction from row 1
  r = verify_chain(std::vector<int32_t>{4, 1}, rows(), s, {}, {});
  EXPECT_EQ(r.num_accepted, 0);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{0}));
}

// Sampled verification emits plain sampling's tokens for the seed whatever was drafted: row i
// decides generated token i, so the chain of verified tokens is a prefix of the plain run's,
// one longer than the accepted drafts, which are that prefix's first tokens.
TEST(Verify, SampledVerificationEmitsPlainSamplingsTokensWhateverTheDrafts) {
  sampling::SamplingParams params;
  params.temperature = 0.8f;
  params.top_p = 0.95f;
  int accepted = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    params.seed = seed;
    const sampling::Sampler sampler(params);
    std::vector<int32_t> plain;  // the fixed target's row i does not depend on the tokens before
    for (size_t i = 0; i < kRows.size(); ++i) plain.push_back(sampler.choose(kRows[i], static_cast<int64_t>(i)));
    for (int32_t a = 0; a < 6; ++a)
      for (int32_t b = 0; b < 6; ++b) {
        const auto r = verify_chain(std::vector<int32_t>{a, b}, rows(), sampler, {}, {});
        ASSERT_EQ(r.tokens.size(), static_cast<size_t>(r.num_accepted) + 1);
        EXPECT_TRUE(std::equal(r.tokens.begin(), r.tokens.end(), plain.begin())) << "seed " << seed;
        accepted += r.num_accepted;
      }
  }
  EXPECT_GT(accepted, 0);  // drafts were accepted, not only corrected
}

// The first emitted token follows row 0's distribution whatever the draft, the second (when the
// first equals the first draft) row 1's: one verification per seed, as requests do.
void check_distribution(float temperature, double* p_first, double* p_second) {
  sampling::SamplingParams params;
  params.temperature = temperature;
  std::vector<long> first(6, 0), second(6, 0);
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    params.seed = 1234 + static_cast<uint64_t>(i);
    const sampling::Sampler sampler(params);
    // Drafts: token 1 (row 0's second-best) then token 2.
    auto r = verify_chain(std::vector<int32_t>{1, 2}, rows(), sampler, {}, {});
    ++first[r.tokens[0]];
    if (r.tokens[0] == 1 && r.tokens.size() > 1) ++second[r.tokens[1]];
  }
  *p_first = testing::goodness_of_fit_p(first, softmax(kRows[0]));
  *p_second = testing::goodness_of_fit_p(second, softmax(kRows[1]));
}

TEST(Verify, SampledVerificationPreservesTheTargetDistribution) {
  double p1, p2;
  check_distribution(1.0f, &p1, &p2);
  EXPECT_GT(p1, 0.01);
  EXPECT_GT(p2, 0.01);
}

TEST(Verify, ADistributionOtherThanTheTargetsIsDetected) {
  double p1, p2;
  // Verifying at temperature 0.7 against the temperature-1 target: the test must see it.
  check_distribution(0.7f, &p1, &p2);
  EXPECT_LT(p1, 1e-6);
}

TEST(Ngram, ProposesWhatFollowedTheMostRecentMatch) {
  const std::vector<int32_t> t = {1, 2, 3, 4, 5, 9, 1, 2, 3, 7, 8, 6, 1, 2, 3};
  EXPECT_EQ(ngram_propose(t, 3, {}), (std::vector<int32_t>{7, 8, 6}));  // the later match wins
  EXPECT_EQ(ngram_propose(t, 1, {}), (std::vector<int32_t>{7}));
  EXPECT_TRUE(ngram_propose(std::vector<int32_t>{1, 2, 3, 4}, 3, {}).empty());
  const std::vector<int32_t> tail_match = {5, 6, 7, 5, 6};
  EXPECT_EQ(ngram_propose(tail_match, 5, {}), (std::vector<int32_t>{7, 5, 6}));  // stops at the end
}

TEST(Ngram, TrigramRepetitionScoresRepeatedText) {
  std::vector<int32_t> novel(100), repeated;
  for (int i = 0; i < 100; ++i) novel[i] = i;
  for (int i = 0; i < 100; ++i) repeated.push_back(i % 10);
  EXPECT_EQ(trigram_repetition(novel), 0.0);
  EXPECT_GT(trigram_repetition(repeated), 0.8);
}

}  // namespace
}  // namespace tachyon::spec

namespace tachyon::spec {
namespace {

TEST(Suffix, FollowsTheLongestMatchAndTheMostFrequentBranch) {
  SuffixTrie trie(8);
  trie.add(std::vector<int32_t>{1, 2, 3, 4, 5});
  trie.add(std::vector<int32_t>{9, 2, 3, 7, 8});
  trie.add(std::vector<int32_t>{6, 2, 3, 7, 8});
  // Context ends with "2 3": both 4 and 7 follow; 7 twice.
  auto [m, draft] = trie.propose(std::vector<int32_t>{0, 2, 3}, 3, 2);
  EXPECT_EQ(m, 2);
  EXPECT_EQ(draft, (std::vector<int32_t>{7, 8}));  // the branch ends after 8
  // A longer match wins over frequency: "1 2 3" continues with 4.
  std::tie(m, draft) = trie.propose(std::vector<int32_t>{1, 2, 3}, 2, 2);
  EXPECT_EQ(m, 3);
  EXPECT_EQ(draft, (std::vector<int32_t>{4, 5}));
  // Removing a sequence removes its counts.
  trie.add(std::vector<int32_t>{9, 2, 3, 7, 8}, -1);
  trie.add(std::vector<int32_t>{6, 2, 3, 7, 8}, -1);
  std::tie(m, draft) = trie.propose(std::vector<int32_t>{0, 2, 3}, 1, 2);
  EXPECT_EQ(draft, (std::vector<int32_t>{4}));
}

TEST(Suffix, DrafterLearnsFromPastOutputs) {
  auto d = make_suffix_drafter({});
  const std::vector<int32_t> first = {5, 6, 7, 100, 101, 102, 103};
  EXPECT_TRUE(d->propose(1, std::vector<int32_t>{5, 6, 7, 100}, 3).empty() ||
              d->propose(1, std::vector<int32_t>{5, 6, 7, 100}, 3).size() <= 3);
  d->on_finish(1, first, 3);  // output 100..103 recorded globally
  // Another request whose context ends like that output continues it.
  EXPECT_EQ(d->propose(2, std::vector<int32_t>{42, 43, 100, 101}, 2), (std::vector<int32_t>{102, 103}));
}

}  // namespace
}  // namespace tachyon::spec
