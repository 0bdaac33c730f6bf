// How a batched step's time is split among its requests (engine/step_shares.h).
#include "engine/step_shares.h"

#include <gtest/gtest.h>

namespace tachyon::engine {
namespace {

TEST(StepShares, AnUnfittedModelSplitsAStepEqually) {
  const StepShares shares;
  EXPECT_DOUBLE_EQ(shares.row_seconds(), 0.0);
  EXPECT_DOUBLE_EQ(shares.share(8.0, 7, 14, 4), 2.0);
  EXPECT_DOUBLE_EQ(shares.share(8.0, 1, 14, 4), 2.0);
}

TEST(StepShares, ARequestAloneIsChargedTheWholeStep) {
  StepShares shares;
  for (int64_t rows : {1, 7, 3, 5}) shares.record(rows, 1.0 + 0.5 * rows);
  EXPECT_DOUBLE_EQ(shares.share(4.5, 7, 7, 1), 4.5);
}

// Steps that cost 2 + 0.25 per row: the fit finds the slope, a request's own rows are charged at
// it, the fixed part is split, and the shares add up to the step.
TEST(StepShares, EachRequestPaysForItsOwnRowsAtTheFittedRate) {
  StepShares shares;
  for (int i = 0; i < 50; ++i)
    for (int64_t rows : {8, 20, 56, 32}) shares.record(rows, 2.0 + 0.25 * static_cast<double>(rows));
  EXPECT_NEAR(shares.row_seconds(), 0.25, 1e-9);
  // 8 requests, 4 verifying 6 drafts (7 rows) and 4 plain (1 row): 32 rows, 10 s.
  const double verify = shares.share(10.0, 7, 32, 8), plain = shares.share(10.0, 1, 32, 8);
  EXPECT_NEAR(verify, 0.25 + 7 * 0.25, 1e-9);
  EXPECT_NEAR(plain, 0.25 + 1 * 0.25, 1e-9);
  EXPECT_NEAR(4 * verify + 4 * plain, 10.0, 1e-9);
}

// Rows that never varied say nothing about their cost; a slope above the step's own time per
// row is capped there, so no share is negative.
TEST(StepShares, NoSlopeWithoutVariedRowsAndNoNegativeShares) {
  StepShares same;
  for (int i = 0; i < 20; ++i) same.record(8, 1.0 + 0.01 * i);
  EXPECT_DOUBLE_EQ(same.row_seconds(), 0.0);
  StepShares steep;
  for (int64_t rows : {1, 2, 3, 4}) steep.record(rows, 10.0 * static_cast<double>(rows));
  EXPECT_GT(steep.share(1.0, 1, 10, 5), 0.0);
  EXPECT_NEAR(steep.share(1.0, 1, 10, 5), 0.1, 1e-9);
  EXPECT_DOUBLE_EQ(steep.share(1.0, 0, 10, 5), 0.0);
}

}  // namespace
}  // namespace tachyon::engine
