// The scheduler on counts alone: a fake allocator with a fixed number of blocks, no tensors.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <map>

namespace tachyon::engine {
namespace {

class FakeKv : public KvAllocator {
 public:
  FakeKv(int32_t blocks, int32_t block_size) : free_(blocks), bs_(block_size) {}
  int32_t begin_sequence(RequestId id, int32_t) override {
    held_[id] = 0;
    return cached_prefix_.count(id) ? cached_prefix_[id] : 0;
  }
  bool reserve(RequestId id, int32_t, int32_t n) override {
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

// A cache with two block groups (kv::KvLayout::splits_sliding): full-attention layers keep every
// block, sliding-window layers hold only the blocks their window reaches from the first row to
// compute on, and a reservation needs room in both.
class FakeSlidingKv : public KvAllocator {
 public:
  FakeSlidingKv(int32_t full, int32_t sliding, int32_t block_size, int32_t window)
      : full_free_(full), sliding_free_(sliding), bs_(block_size), window_(window) {}
  struct Held {
    int32_t full = 0, sliding_begin = 0, sliding_end = 0, computed = 0;  // sliding blocks [begin, end)
  };
  int32_t begin_sequence(RequestId id, int32_t) override {
    held_[id] = {};
    return 0;
  }
  bool reserve(RequestId id, int32_t num_computed, int32_t n) override {
    Held& h = held_.at(id);
    EXPECT_GE(num_computed, h.computed) << "request " << id << " went back behind released sliding blocks";
    h.computed = num_computed;
    const int32_t first_key = num_computed - window_ + 1;
    const int32_t release_to = std::min(first_key > 0 ? first_key / bs_ : 0, h.sliding_end);
    if (release_to > h.sliding_begin) {
      sliding_free_ += release_to - h.sliding_begin;
      h.sliding_begin = release_to;
    }
    const int32_t need = (n + bs_ - 1) / bs_ - h.full;
    if (need > full_free_ || need > sliding_free_) return false;
    if (need > 0) {
      full_free_ -= need, sliding_free_ -= need;
      h.full += need, h.sliding_end += need;
    }
    max_sliding_held_ = std::max(max_sliding_held_, h.sliding_end - h.sliding_begin);
    return true;
  }
  void end_sequence(RequestId id) override {
    const Held& h = held_.at(id);
    full_free_ += h.full;
    sliding_free_ += h.sliding_end - h.sliding_begin;
    held_.erase(id);
  }
  int32_t full_free_, sliding_free_, bs_, window_, max_sliding_held_ = 0;
  std::map<RequestId, Held> held_;
};

// Long generations through a sliding pool that holds two windows: each request's sliding blocks
// stay bounded by its window however long it grows, preemption makes room when the sliding
// group runs out, and every request reaches the end of its context.
TEST(Scheduler, SlidingBlocksStayBoundedAndEveryRequestCompletes) {
  constexpr int32_t kBlockSize = 4, kWindow = 8, kContext = 96, kRequests = 5, kStep = 12;
  // A step's chunk and its window: at most (8 − 1 + 12) / 4 rounded up, plus one partial block.
  constexpr int32_t kPerSequence = (kWindow - 1 + kStep + kBlockSize - 1) / kBlockSize + 1;
  constexpr int32_t kFull = kRequests * kContext / kBlockSize, kSliding = 2 * kPerSequence;
  FakeSlidingKv kv(kFull, kSliding, kBlockSize, kWindow);
  Scheduler s({.max_concurrent = kRequests, .max_tokens_per_step = kStep}, kv);
  std::map<RequestId, int32_t> tokens;
  for (RequestId id = 1; id <= kRequests; ++id) {
    tokens[id] = 5 + 3 * static_cast<int32_t>(id);
    s.add(id, tokens[id]);
  }
  std::map<RequestId, bool> done;
  for (int32_t steps = 0; done.size() < kRequests;) {
    ASSERT_LT(++steps, 10000) << "no progress";
    StepPlan plan = s.schedule();
    ASSERT_FALSE(plan.chunks.empty()) << "step " << steps << " schedules nothing with work left";
    for (const auto& c : plan.chunks) {
      s.on_computed(c.id, c.count);
      if (!c.completes) continue;
      if (++tokens[c.id] == kContext) {
        s.remove(c.id);
        done[c.id] = true;
      } else {
        s.on_token_appended(c.id);
      }
    }
  }
  EXPECT_LE(kv.max_sliding_held_, kPerSequence);
  EXPECT_GT(s.num_preemptions(), 0u) << "the sliding pool never ran out: preemption not exercised";
  EXPECT_EQ(kv.full_free_, kFull);
  EXPECT_EQ(kv.sliding_free_, kSliding);
}

}  // namespace
}  // namespace tachyon::engine
