// Faults in the engine, injected (engine/fault_injection.h) where a backend's own device error
// or allocation failure would surface: the requests a fault touches end with an error finish,
// the others in the same steps finish with exactly the tokens they get without faults, later
// requests are served, and every KV block comes back.
#include <gtest/gtest.h>

#include <atomic>

#include "base/error.h"
#include "engine/engine.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "demo_runs.h"
#include "engine_test_helpers.h"

namespace tachyon::engine {
namespace {

using namespace test_helpers;

constexpr int32_t kVictim = 7999;  // the first prompt token that marks a request the fault touches

using testing_demo::kDemo;
testing_demo::Demo& fixture() { return testing_demo::demo(); }

// Prompts 0..n-1; prompt `victim` starts with kVictim, the others never do.
std::vector<std::vector<int32_t>> prompts_with_victim(size_t n, size_t victim) {
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < n; ++i) {
    prompts.push_back(random_prompt(12 + 7 * i, 900 + i));
    prompts.back()[0] = i == victim ? kVictim : static_cast<int32_t>(i);
  }
  return prompts;
}

std::vector<std::vector<int32_t>> alone_outputs(const std::vector<std::vector<int32_t>>& prompts, int32_t max_tokens) {
  Engine engine(*fixture().model, {.max_concurrent = 1, .num_blocks = 64, .prefix_cache = false});
  std::vector<std::vector<int32_t>> out;
  for (const auto& p : prompts) out.push_back(collect(*engine.submit(greedy(p, max_tokens))));
  return out;
}

TEST(EngineFaults, DeviceErrorFailsOnlyTheRequestItTouchedAndTheEngineServesOn) {
  const auto prompts = prompts_with_victim(4, 2);
  const auto alone = alone_outputs(prompts, 20);
  EngineConfig config{.max_concurrent = 4, .max_tokens_per_step = 64, .num_blocks = 64};
  // A lasting fault: every forward holding the victim, from its 3rd generated token on, fails.
  config.fault_injector = [](RequestId, const GenerationRequest& r, int32_t num_generated) {
    return r.prompt[0] == kVictim && num_generated >= 3 ? FaultKind::kDeviceError : FaultKind::kNone;
  };
  Engine engine(*fixture().model, config);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& p : prompts) streams.push_back(engine.submit(greedy(p, 20)));
  for (size_t i = 0; i < prompts.size(); ++i) {
    RequestOutput last;
    const auto tokens = collect(*streams[i], &last);
    if (i == 2) {
      EXPECT_EQ(last.finish, FinishReason::Error);
      EXPECT_NE(last.error.find("injected device error"), std::string::npos) << last.error;
      EXPECT_EQ(tokens, std::vector<int32_t>(alone[i].begin(), alone[i].begin() + 3)) << "its tokens before the fault";
    } else {
      EXPECT_EQ(last.finish, FinishReason::Length) << "request " << i;
      EXPECT_EQ(tokens, alone[i]) << "request " << i;
    }
  }
  // Later requests, the victim's prompt among them, are served: the fault only touches the
  // victim's own forwards, and only from its 3rd token, so a 3-token request gets through.
  EXPECT_EQ(collect(*engine.submit(greedy(prompts[0], 20))), alone[0]);
  RequestOutput last;
  EXPECT_EQ(collect(*engine.submit(greedy(prompts[2], 3)), &last).size(), 3u);
  EXPECT_EQ(last.finish, FinishReason::Length);
  const auto st = idle_stats(engine);
  EXPECT_EQ(st.requests_failed, 1u);
  EXPECT_GE(st.failed_steps, 2u);  // the shared step, then the victim's own
  EXPECT_EQ(st.kv_blocks_free, st.kv_blocks_total) << "leaked KV blocks";
}

TEST(EngineFaults, AllocationFailureOnceCostsNoRequestAndLastingOneFailsOnlyItsRequest) {
  const auto prompts = prompts_with_victim(3, 1);
  const auto alone = alone_outputs(prompts, 16);
  {
    // One failed forward (an allocation that fails once): the step's requests run again, each
    // alone, and all of them finish with their own tokens.
    std::atomic<bool> failed_once{false};
    EngineConfig config{.max_concurrent = 3, .num_blocks = 64};
    config.fault_injector = [&](RequestId, const GenerationRequest& r, int32_t num_generated) {
      if (r.prompt[0] != kVictim || num_generated < 5 || failed_once.exchange(true)) return FaultKind::kNone;
      return FaultKind::kOutOfMemory;
    };
    Engine engine(*fixture().model, config);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& p : prompts) streams.push_back(engine.submit(greedy(p, 16)));
    for (size_t i = 0; i < prompts.size(); ++i) {
      RequestOutput last;
      EXPECT_EQ(collect(*streams[i], &last), alone[i]) << "request " << i;
      EXPECT_EQ(last.finish, FinishReason::Length) << "request " << i;
    }
    const auto st = idle_stats(engine);
    EXPECT_TRUE(failed_once.load());
    EXPECT_EQ(st.failed_steps, 1u);
    EXPECT_EQ(st.requests_failed, 0u);
    EXPECT_EQ(st.kv_blocks_free, st.kv_blocks_total);
  }
  // Out of memory on every forward of the victim, in a pool so small the others are preempted
  // and recomputed meanwhile: the victim fails with the reason, the others finish exactly.
  EngineConfig config{.max_concurrent = 3, .max_tokens_per_step = 16, .num_blocks = 5};
  config.fault_injector = [](RequestId, const GenerationRequest& r, int32_t) {
    return r.prompt[0] == kVictim ? FaultKind::kOutOfMemory : FaultKind::kNone;
  };
  Engine engine(*fixture().model, config);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& p : prompts) streams.push_back(engine.submit(greedy(p, 16)));
  for (size_t i = 0; i < prompts.size(); ++i) {
    RequestOutput last;
    const auto tokens = collect(*streams[i], &last);
    if (i == 1) {
      EXPECT_EQ(last.finish, FinishReason::Error);
      EXPECT_EQ(last.error, "out of memory in the forward");
      EXPECT_TRUE(tokens.empty());
    } else {
      EXPECT_EQ(last.finish, FinishReason::Length) << "request " << i;
      EXPECT_EQ(tokens, alone[i]) << "request " << i;
    }
  }
  const auto st = idle_stats(engine);
  EXPECT_EQ(st.requests_failed, 1u);
  EXPECT_EQ(st.kv_blocks_free, 5);
}

// KV exhaustion is not a fault: more requests than the pool holds queue or are preempted and
// recomputed; none ends with an error, each gets its own tokens.
TEST(EngineFaults, KvExhaustionNeverFailsARunningRequest) {
  const auto prompts = prompts_with_victim(6, 99);
  const auto alone = alone_outputs(prompts, 24);
  Engine engine(*fixture().model, {.max_concurrent = 6, .max_tokens_per_step = 24, .num_blocks = 7});
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& p : prompts) streams.push_back(engine.submit(greedy(p, 24)));
  for (size_t i = 0; i < prompts.size(); ++i) {
    RequestOutput last;
    EXPECT_EQ(collect(*streams[i], &last), alone[i]) << "request " << i;
    EXPECT_EQ(last.finish, FinishReason::Length) << "request " << i;
  }
  const auto st = idle_stats(engine);
  EXPECT_GT(st.preemptions, 0u);
  EXPECT_EQ(st.requests_failed, 0u);
  EXPECT_EQ(st.kv_blocks_free, 7);
}

TEST(EngineFaults, DebugSwitchSpecIsParsedAndMalformedOnesNamed) {
  const FaultInjector every3 = parse_fault_spec("device:every=3,after=2");
  const GenerationRequest r;
  EXPECT_EQ(every3(6, r, 2), FaultKind::kDeviceError);
  EXPECT_EQ(every3(6, r, 1), FaultKind::kNone);
  EXPECT_EQ(every3(7, r, 5), FaultKind::kNone);
  EXPECT_EQ(parse_fault_spec("oom:every=1")(1, r, 0), FaultKind::kOutOfMemory);
  for (const char* bad : {"", "disk:every=2", "device", "device:every=0", "device:every=x", "device:each=2"}) {
    try {
      parse_fault_spec(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("TACHYON_FAULTS"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tachyon::engine
