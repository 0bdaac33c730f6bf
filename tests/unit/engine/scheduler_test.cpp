// The scheduler on counts alone: a fake allocator with a fixed number of blocks, no tensors.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <map>

namespace tachyon::engine {
namespace {

class FakeKv : public KvAllocator {
 public:
  FakeKv(int32_t blocks, int32_t block_size) : free_(blocks), bs_(block_size) {}
  int32_t begin_sequence(RequestId id) override {
    held_[id] = 0;
    return cached_prefix_.count(id) ? cached_prefix_[id] : 0;
  }
  bool reserve(RequestId id, int32_t n) override {
    const int32_t need = (n + bs_ - 1) / bs_ - held_[id];
    if (need > free_) return false;
    if (need > 0) {
      free_ -= need;
      held_[id] += need;
    }
    return true;
  }
  void end_sequence(RequestId id) override {
    free_ += held_[id];
    held_.erase(id);
  }
  int32_t free_;
  int32_t bs_;
  std::map<RequestId, int32_t> held_, cached_prefix_;
};

TEST(Scheduler, ChunksLongPromptsUnderTheBudgetWhileDecodesContinue) {
  FakeKv kv(100, 16);
  Scheduler s({.max_concurrent = 4, .max_tokens_per_step = 64}, kv);
  s.add(1, 10);
  auto plan = s.schedule();
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].count, 10);
  EXPECT_TRUE(plan.chunks[0].completes);
  s.on_computed(1, 10);
  s.on_token_appended(1);
  s.add(2, 150);  // a long prompt arrives while 1 decodes
  plan = s.schedule();
  ASSERT_EQ(plan.chunks.size(), 2u);
  EXPECT_EQ(plan.chunks[0].id, 1u);  // the decode first
  EXPECT_EQ(plan.chunks[0].count, 1);
  EXPECT_EQ(plan.chunks[1].id, 2u);
  EXPECT_EQ(plan.chunks[1].count, 63);  // the rest of the budget
  EXPECT_FALSE(plan.chunks[1].completes);
  EXPECT_EQ(plan.num_tokens(), 64);
}

TEST(Scheduler, PrefixHitsSkipComputedTokens) {
  FakeKv kv(100, 16);
  kv.cached_prefix_[7] = 32;
  Scheduler s({}, kv);
  s.add(7, 40);
  auto plan = s.schedule();
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].begin, 32);
  EXPECT_EQ(plan.chunks[0].count, 8);
}

TEST(Scheduler, RespectsMaxConcurrent) {
  FakeKv kv(100, 16);
  Scheduler s({.max_concurrent = 2, .max_tokens_per_step = 512}, kv);
  for (RequestId id = 1; id <= 3; ++id) s.add(id, 4);
  auto plan = s.schedule();
  EXPECT_EQ(plan.chunks.size(), 2u);
  EXPECT_EQ(s.num_waiting(), 1);
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOutAndNeverLosesARequest) {
  FakeKv kv(4, 4);  // 16 token slots
  Scheduler s({.max_concurrent = 4, .max_tokens_per_step = 512}, kv);
  s.add(1, 7);  // 2 blocks
  s.add(2, 7);  // 2 blocks
  auto plan = s.schedule();
  ASSERT_EQ(plan.chunks.size(), 2u);
  for (RequestId id : {1u, 2u}) {
    s.on_computed(id, 7);
    s.on_token_appended(id);  // 8 tokens each: still 2 blocks
  }
  plan = s.schedule();  // both decode their 8th token
  for (RequestId id : {1u, 2u}) {
    s.on_computed(id, 1);
    s.on_token_appended(id);  // 9 tokens: needs a 3rd block each, only 0 free
  }
  plan = s.schedule();
  ASSERT_EQ(plan.preempted.size(), 1u);
  EXPECT_EQ(plan.preempted[0], 2u);  // the newest goes
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].id, 1u);
  EXPECT_EQ(s.num_waiting(), 1);
  EXPECT_EQ(s.num_computed(2), 0);  // will recompute
  EXPECT_EQ(s.num_tokens(2), 9);    // keeps its generated tokens
  s.remove(1);
  plan = s.schedule();  // now 2 fits again, recomputing all 9 tokens
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].id, 2u);
  EXPECT_EQ(plan.chunks[0].begin, 0);
  EXPECT_EQ(plan.chunks[0].count, 9);
  s.remove(2);
  EXPECT_EQ(kv.free_, 4);
}

// A request preempted while planning a step does not rejoin that step, even where the blocks it
// gave up would hold its first chunk: the engine trims its drafts after the plan is made, and a
// chunk over them made the commit fail "computed past its tokens" (the soak's abort).
TEST(Scheduler, ARequestPreemptedByAPlanIsNotScheduledInIt) {
  FakeKv kv(4, 4);  // 16 token slots
  Scheduler s({.max_concurrent = 4, .max_tokens_per_step = 8}, kv);
  s.add(1, 3);  // 1 block
  s.add(2, 9);  // 3 blocks, prefilled over two steps
  auto plan = s.schedule();  // 1: 3 tokens; 2: 5 of 9
  ASSERT_EQ(plan.chunks.size(), 2u);
  s.on_computed(1, 3);
  s.on_token_appended(1);
  s.on_computed(2, 5);
  plan = s.schedule();  // 1: its 4th token; 2: the last 4 of its prompt (its 3rd block: none free now)
  ASSERT_EQ(plan.chunks.size(), 2u);
  ASSERT_TRUE(plan.chunks[1].completes);
  for (RequestId id : {1u, 2u}) {
    s.on_computed(id, plan.chunks[id - 1].count);
    s.on_token_appended(id);  // 1: 5 tokens (a 2nd block), 2: 10
  }
  ASSERT_EQ(kv.free_, 0);
  plan = s.schedule();  // 1 needs a block: 2 goes, freeing 3; 1 takes one, 2 would fit in the other 2
  ASSERT_EQ(plan.preempted, std::vector<RequestId>{2u});
  ASSERT_EQ(kv.free_, 2);
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].id, 1u);
  EXPECT_EQ(s.num_waiting(), 1);
  s.on_computed(1, 1);
  s.on_token_appended(1);
  plan = s.schedule();  // the next step takes it back, from its start
  ASSERT_EQ(plan.chunks.size(), 2u);
  EXPECT_EQ(plan.chunks[1].id, 2u);
  EXPECT_EQ(plan.chunks[1].begin, 0);
  EXPECT_EQ(plan.chunks[1].count, 7);
}

// Many requests that each generate to the end of the context, in a pool that holds the context
// once and a bit: every step makes progress, every request reaches the context, nothing leaks.
TEST(Scheduler, ManyRequestsGeneratingToTheContextEndAllCompleteInATinyPool) {
  constexpr int32_t kBlockSize = 4, kContext = 32, kRequests = 6;
  FakeKv kv(kContext / kBlockSize + 2, kBlockSize);
  Scheduler s({.max_concurrent = kRequests, .max_tokens_per_step = 16}, kv);
  std::map<RequestId, int32_t> tokens;
  for (RequestId id = 1; id <= kRequests; ++id) {
    tokens[id] = 3 + static_cast<int32_t>(id);
    s.add(id, tokens[id]);
  }
  int32_t steps = 0;
  std::map<RequestId, bool> done;
  while (done.size() < kRequests) {
    ASSERT_LT(++steps, 10000) << "no progress";
    StepPlan plan = s.schedule();
    ASSERT_FALSE(plan.chunks.empty()) << "step " << steps << " schedules nothing with work left";
    for (const auto& c : plan.chunks) {
      s.on_computed(c.id, c.count);
      if (!c.completes) continue;
      if (++tokens[c.id] == kContext) {  // the sampled token fills the context: finished (length)
        s.remove(c.id);
        done[c.id] = true;
      } else {
        s.on_token_appended(c.id);
      }
    }
  }
  EXPECT_GT(s.num_preemptions(), 0u);
  EXPECT_EQ(s.num_running() + s.num_waiting(), 0);
  EXPECT_EQ(kv.free_, kContext / kBlockSize + 2);
  EXPECT_TRUE(kv.held_.empty());
}

}  // namespace
}  // namespace tachyon::engine
