// The payoff gate's decision (spec/drafter_payoff.h): a model drafter starts on a request
// only while earlier requests measured it faster than plain decoding by enough to repay the
// catch-up over this request's prompt; every kExploreEvery-th request drafts regardless.
#include "spec/drafter_payoff.h"

#include <gtest/gtest.h>

namespace tachyon::spec {
namespace {

TEST(DrafterPayoff, DraftsUntilMeasuredThenOnlyWhereTheSavingsRepayTheCatchUp) {
  DrafterPayoff payoff;
  EXPECT_TRUE(payoff.worth_drafting(1267, 256, 1e-3));  // nothing measured yet (and the first explores)
  EXPECT_TRUE(payoff.worth_drafting(1267, 256, 1e-3));
  // Too little evidence is ignored.
  payoff.record_request(DrafterPayoff::kMinSpecTokens - 1, 1.0, 100, 1.0);
  EXPECT_EQ(payoff.speedup(), 0);
  // 1.5x measured; the catch-up costs 50 us per prompt token.
  payoff.record_request(300, 0.2, 10, 0.01);  // 1500 tok/s against 1000
  EXPECT_DOUBLE_EQ(payoff.speedup(), 1.5);
  payoff.record_catch_up(1000, 0.05);
  // Short prompt, long answer: 256 x 1 ms x (1 - 1/1.5) = 85 ms saved > 1.5 ms catch-up.
  EXPECT_TRUE(payoff.worth_drafting(31, 256, 1e-3));
  // Long prompt, short answer: 16 x 1 ms / 3 = 5 ms < 63 ms of catch-up.
  EXPECT_FALSE(payoff.worth_drafting(1267, 16, 1e-3));
}

TEST(DrafterPayoff, ADrafterSlowerThanPlainStopsAndIsMeasuredAgainEveryFewRequests) {
  DrafterPayoff payoff;
  EXPECT_TRUE(payoff.worth_drafting(31, 256, 1e-3));  // decision 0: explores
  payoff.record_request(100, 0.2, 10, 0.01);         // 500 tok/s against 1000: 0.5x
  payoff.record_catch_up(31, 1e-4);
  int drafted = 0;
  for (int64_t i = 1; i < 2 * DrafterPayoff::kExploreEvery; ++i) drafted += payoff.worth_drafting(31, 4096, 1e-3);
  EXPECT_EQ(drafted, 1) << "only the exploring request drafts";
  // The exploring request measured it faster (the traffic changed): drafting resumes.
  for (int i = 0; i < 8; ++i) payoff.record_request(300, 0.1, 10, 0.01);
  EXPECT_GT(payoff.speedup(), 1.5);
  payoff.worth_drafting(31, 4096, 1e-3);  // decision 16 explores
  EXPECT_TRUE(payoff.worth_drafting(31, 4096, 1e-3));
}

}  // namespace
}  // namespace tachyon::spec
