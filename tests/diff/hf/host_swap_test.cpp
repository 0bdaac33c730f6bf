// Preempted requests through the KV host tier (swap space) on the golden device (golden_device.h:
// built for the CPU in hf_golden_tests with the tier forced, for CUDA in hf_cuda_golden_tests,
// where pinned memory and the copy stream carry it): in a pool too small for the requests, the
// newest are preempted, their blocks go to host memory and come back at their next admission,
// and no resumed request recomputes more than its last partial block; every request gets the
// tokens it gets alone in a large pool (batch invariance) in every KV storage format, for a
// hybrid model (state snapshots travel with the blocks) and a sliding-window model (every layer
// keeps its blocks with a swap space). A tier of two blocks falls back to recompute, still exact.
// (A hybrid model resumes at its last block with a state snapshot: see expect_swaps_exactly.)
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "engine/engine.h"
#include "../../unit/engine/engine_test_helpers.h"
#include "golden_device.h"
#include "kernels/kv_format.h"
#include "model/model.h"

namespace tachyon::testing {
namespace {

using kernels::KvFormat;

constexpr int32_t kContext = 80;
constexpr int32_t kMaxTokens = 40;

std::vector<std::vector<int32_t>> swap_prompts(int64_t vocab) {
  std::mt19937 rng(46);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 5; ++i) {
    std::vector<int32_t> p(static_cast<size_t>(20 + 3 * i));
    for (auto& t : p) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
    prompts.push_back(std::move(p));
  }
  return prompts;
}

struct Run {
  std::vector<std::vector<int32_t>> tokens;
  engine::EngineStats stats;
};

Run run(model::Model& model, const engine::EngineConfig& config, const std::vector<std::vector<int32_t>>& prompts) {
  engine::Engine engine(model, config);
  std::vector<std::shared_ptr<engine::RequestStream>> streams;
  for (const auto& p : prompts) {
    engine::GenerationRequest r;
    r.prompt = p;
    r.max_tokens = kMaxTokens;
    r.sampling.temperature = 0;
    streams.push_back(engine.submit(r));
  }
  Run out;
  for (auto& s : streams) out.tokens.push_back(engine::test_helpers::collect(*s));
  for (int i = 0; i < 200 && (engine.stats().running > 0 || engine.stats().queue_depth > 0); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  out.stats = engine.stats();
  return out;
}

// Alone in a large pool, then preempted through a swap space of 64 MiB, then of two blocks.
void expect_swaps_exactly(model::Model& model, std::optional<KvFormat> format, const std::string& name) {
  SCOPED_TRACE(name);
  const auto prompts = swap_prompts(model.config().vocab_size);
  const Run alone = run(model,
                        {.max_concurrent = 1, .num_blocks = 64, .kv_format = format, .max_context = kContext,
                         .prefix_cache = false, .swap_space_bytes = 0},
                        prompts);
  engine::EngineConfig tiny{.max_concurrent = 5, .max_tokens_per_step = 32, .num_blocks = 6, .kv_format = format,
                            .max_context = kContext, .swap_space_bytes = int64_t{64} << 20};
  const Run swapped = run(model, tiny, prompts);
  const engine::EngineStats& st = swapped.stats;
  EXPECT_EQ(swapped.tokens, alone.tokens);
  ASSERT_TRUE(st.host_swap_enabled);
  EXPECT_GT(st.preemptions, 0u);
  EXPECT_GT(st.preempted_resumes, 0u);
  EXPECT_GT(st.swap_out_blocks, 0u);
  EXPECT_GT(st.swap_in_blocks, 0u);
  // A hybrid model resumes at a block with a state snapshot: one every state_snapshot_interval
  // blocks (model/blocks/decoder.cpp), so up to that many blocks before the partial one are
  // recomputed (the snapshot pool recycles too); K/V-only models resume at the partial block.
  const int32_t interval = model.kv_layout(1, 16).num_state_layers > 0 ? model.kv_layout(1, 16).state_snapshot_interval : 0;
  if (interval == 0) {
    EXPECT_EQ(st.preempted_recomputed_tokens, 0u);
  } else {
    EXPECT_LE(st.preempted_recomputed_tokens, st.preempted_resumes * static_cast<uint64_t>(interval) * 16u);
  }
  EXPECT_EQ(st.kv_blocks_free, 6);
  std::printf("%s on %s: %llu preemptions, %llu resumes, %llu blocks swapped out, %llu in (%llu bytes), %llu tokens "
              "recomputed after preemption, %llu prompt tokens computed\n",
              name.c_str(), kGoldenDevice.c_str(), static_cast<unsigned long long>(st.preemptions),
              static_cast<unsigned long long>(st.preempted_resumes), static_cast<unsigned long long>(st.swap_out_blocks),
              static_cast<unsigned long long>(st.swap_in_blocks), static_cast<unsigned long long>(st.swap_in_bytes),
              static_cast<unsigned long long>(st.preempted_recomputed_tokens),
              static_cast<unsigned long long>(st.computed_prompt_tokens));

  tiny.swap_space_bytes = 2 * st.swap_space_bytes / st.swap_blocks;
  const Run full = run(model, tiny, prompts);
  EXPECT_EQ(full.tokens, alone.tokens);
  EXPECT_EQ(full.stats.swap_blocks, 2);
  EXPECT_GT(full.stats.swap_evictions, 0u);
  EXPECT_GT(full.stats.preempted_recompute_fallbacks, 0u);
  EXPECT_EQ(full.stats.kv_blocks_free, 6);
}

TEST(HostSwap, PreemptedRequestsResumeExactlyInEveryKvFormat) {
  if (!golden_device_available()) GTEST_SKIP() << "no GPU visible";
  auto backend = kernels::make_backend(kGoldenDevice);
  const auto model = model::load_model(std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo", *backend);
  // On the CPU one quantized format (bf16 runs in engine_test.cpp; every format's bytes round-trip
  // in kv_cache_host_tier_test.cpp); on CUDA each.
  std::vector<KvFormat> formats = {KvFormat::Int8};
  if (golden_on_cuda()) formats = {KvFormat::BF16, KvFormat::FP8, KvFormat::Int8, KvFormat::Int4, KvFormat::Turbo};
  for (const KvFormat f : formats) {
    if (kernels::kv_format_unsupported(f, model->config().head_dim) || !backend->supports_kv_format(f)) continue;
    expect_swaps_exactly(*model, f, std::string("demo, ") + std::string(kernels::kv_format_name(f)));
  }
}

TEST(HostSwap, HybridAndSlidingWindowModelsResumeExactly) {
  if (!golden_device_available()) GTEST_SKIP() << "no GPU visible";
  auto backend = kernels::make_backend(kGoldenDevice);
  for (const char* arch : {"qwen3_next", "gemma3_text"}) {
    const auto model = model::load_model(std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/hf/" + arch, *backend);
    expect_swaps_exactly(*model, std::nullopt, arch);
  }
}

// On a GPU the swap space is on by default; on the CPU off (its KV is in host memory already).
TEST(HostSwap, TheSwapSpaceIsOnByDefaultOnAGpuAndOffWhenAskedTo) {
  if (!golden_device_available()) GTEST_SKIP() << "no GPU visible";
  auto backend = kernels::make_backend(kGoldenDevice);
  const auto model = model::load_model(std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo", *backend);
  {
    // On the CPU the pool is host memory already: the default leaves the tier off there.
    engine::Engine engine(*model, {.max_concurrent = 2, .num_blocks = 16});
    EXPECT_EQ(engine.swap_space().bytes > 0, golden_on_cuda()) << engine.swap_space().why;
    EXPECT_EQ(engine.stats().host_swap_enabled, golden_on_cuda());
  }
  engine::Engine off(*model, {.max_concurrent = 2, .num_blocks = 16, .swap_space_bytes = 0});
  EXPECT_EQ(off.swap_space().bytes, 0) << off.swap_space().why;
  EXPECT_FALSE(off.stats().host_swap_enabled);
}

// The auto size is the pool's bytes; a host slot also carries a hybrid model's recurrent state.
// A pool of two blocks beside Qwen3-Next's state holds no slot: the engine starts with the tier
// off (it used to refuse to start), while the same too-small size given by the user still fails.
TEST(HostSwap, AnAutoSwapSpaceTooSmallForOneSlotIsOffNotAnError) {
  if (!golden_on_cuda() || !golden_device_available()) GTEST_SKIP() << "the auto swap space is a GPU default";
  auto backend = kernels::make_backend(kGoldenDevice);
  const auto model = model::load_model(std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/hf/qwen3_next", *backend);
  engine::Engine tiny(*model, {.max_concurrent = 1, .num_blocks = 2});
  const engine::EngineStats stats = tiny.stats();
  if (stats.host_swap_enabled) {  // this fixture's state fits beside two blocks after all: a slot at least
    EXPECT_GE(stats.swap_blocks, 1);
    GTEST_SKIP() << "two blocks of this fixture hold a slot: " << tiny.swap_space().why;
  }
  EXPECT_EQ(tiny.swap_space().bytes, 0);
  EXPECT_NE(tiny.swap_space().why.find("holds no block"), std::string::npos) << tiny.swap_space().why;
  EXPECT_THROW(engine::Engine(*model, {.max_concurrent = 1, .num_blocks = 2, .swap_space_bytes = 4096}),
               tachyon::Error);
}

}  // namespace
}  // namespace tachyon::testing
