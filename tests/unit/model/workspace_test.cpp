// The model's activation workspace on a device that runs out of memory part-way through a
// forward (a long prompt beside a full KV pool): the failed step must leave no released buffer
// behind, which the next step would write into and the destructor would free a second time.
#include <gtest/gtest.h>

#include "base/error.h"
#include "model/blocks/step_context.h"
#include "../runs_out_backend.h"

namespace tachyon::model {
namespace {

using test_support::RunsOutBackend;

TEST(Workspace, ASlotWhoseGrowthRunsOutOfMemoryIsLeftEmptyAndGrowsAgainLater) {
  RunsOutBackend backend;
  {
    Workspace ws(backend);
    float* small = ws.get(Workspace::kQ, 64);
    ASSERT_NE(small, nullptr);
    EXPECT_EQ(ws.get(Workspace::kQ, 32), small) << "a smaller request reuses the buffer";
    backend.fail_at = backend.allocations();  // the growth's allocation fails
    EXPECT_THROW(ws.get(Workspace::kQ, 1 << 20), Error);
    EXPECT_EQ(backend.live, 0) << "the old buffer was released before the larger one was asked for";
    // The next step, with room again, gets a fresh buffer of the size it needs, not the freed one.
    float* grown = ws.get(Workspace::kQ, 1 << 20);
    ASSERT_NE(grown, nullptr);
    grown[(1 << 20) - 1] = 1.f;
    EXPECT_EQ(backend.live, 1);
  }
  EXPECT_EQ(backend.live, 0) << "the destructor frees each buffer once";
}

TEST(Workspace, AFailedFirstAllocationLeavesNothingToFree) {
  RunsOutBackend backend;
  backend.fail_at = 0;
  {
    Workspace ws(backend);
    EXPECT_THROW(ws.get(Workspace::kLogits, 1000), Error);
  }
  EXPECT_EQ(backend.live, 0);
}

}  // namespace
}  // namespace tachyon::model
