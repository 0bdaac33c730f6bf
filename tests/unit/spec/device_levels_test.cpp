// A model drafter's chain levels on a device that runs out of memory when they grow (a longer
// chain than any before, beside a full KV pool): the failure leaves no released buffer behind,
// which the next chain would write into and the destructor would free a second time.
#include <gtest/gtest.h>

#include "base/error.h"
#include "spec/level_drafter.h"
#include "../runs_out_backend.h"

namespace tachyon::spec {
namespace {

using test_support::RunsOutBackend;

TEST(DeviceLevels, GrowingPastAFailedAllocationLeavesThemEmptyAndGrowsAgainLater) {
  RunsOutBackend backend;
  {
    DeviceLevels levels(backend);
    kernels::TopTwo* four = levels.get(4);
    ASSERT_NE(four, nullptr);
    EXPECT_EQ(levels.get(3), four) << "fewer levels reuse the buffer";
    backend.fail_at = backend.allocations();  // the growth's allocation fails
    EXPECT_THROW(levels.get(64), Error);
    EXPECT_EQ(backend.live, 0) << "the old levels were released before the larger ones were asked for";
    kernels::TopTwo* grown = levels.get(64);
    ASSERT_NE(grown, nullptr);
    grown[63].best = 7;
    EXPECT_EQ(backend.live, 1);
  }
  EXPECT_EQ(backend.live, 0) << "the destructor frees the levels once";
}

TEST(DeviceLevels, LevelsNeverAllocatedFreeNothing) {
  RunsOutBackend backend;
  { DeviceLevels levels(backend); }
  EXPECT_EQ(backend.live, 0);
}

}  // namespace
}  // namespace tachyon::spec
