// Overlapped decoding (EngineConfig::overlap_steps): a plain decode step is issued before the
// tokens of the step before it are read, its rows reading them on the device. On the CPU the
// backend below makes the read really late: copy_to_host_later keeps the bytes and delivers
// them only at wait_host_read (the caller's buffer holds garbage until then), so an engine that
// used a token before collecting it, or fed the next step the wrong row, would differ from the
// engine without the overlap. Outputs must be identical, stops and cancellations exact, no KV
// block leaked.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

#include "engine/engine.h"
#include "io/safetensors.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "demo_runs.h"
#include "engine_test_helpers.h"

namespace tachyon::engine {
namespace {

using namespace test_helpers;
using testing_demo::kDemo;


class LateReadBackend final : public kernels::CpuBackend {
 public:
  HostRead copy_to_host_later(void* dst, const void* src, size_t bytes) override {
    Read& r = reads_.emplace_back();
    r.id = ++last_id_;
    r.dst = dst;
    r.bytes.assign(static_cast<const std::byte*>(src), static_cast<const std::byte*>(src) + bytes);
    std::memset(dst, 0x7f, bytes);  // what an early reader would see
    ++reads_started;
    max_outstanding = std::max(max_outstanding, static_cast<int64_t>(reads_.size()));
    return {r.id};
  }
  void wait_host_read(HostRead read) override {
    for (auto it = reads_.begin(); it != reads_.end(); ++it)
      if (it->id == read.id) {
        std::memcpy(it->dst, it->bytes.data(), it->bytes.size());
        reads_.erase(it);
        return;
      }
    ADD_FAILURE() << "read " << read.id << " collected twice or never started";
  }
  void embedding_device_ids(const kernels::Weight& table, const int32_t* ids, int64_t rows, float scale,
                            float* out) override {
    rows_fed_on_device += rows;
    CpuBackend::embedding_device_ids(table, ids, rows, scale, out);
  }
  int64_t reads_started = 0, rows_fed_on_device = 0, max_outstanding = 0;
  size_t outstanding() const { return reads_.size(); }

 private:
  struct Read {
    uint64_t id;
    void* dst;
    std::vector<std::byte> bytes;
  };
  std::vector<Read> reads_;
  uint64_t last_id_ = 0;
};

struct Fixture {
  LateReadBackend backend;
  std::unique_ptr<model::Model> model = model::load_model(kDemo, backend);
};
Fixture& fixture() {
  static Fixture f;
  return f;
}

GenerationRequest request(uint32_t seed, int32_t max_tokens, bool sampled) {
  GenerationRequest r;
  r.prompt = random_prompt(9 + 7 * (seed % 5), seed);
  r.max_tokens = max_tokens;
  r.sampling.temperature = sampled ? 0.9f : 0.f;
  r.sampling.top_p = sampled ? 0.95f : 1.f;
  r.sampling.seed = 500 + seed;
  return r;
}

EngineConfig config(EngineConfig::Overlap overlap, int32_t concurrent) {
  EngineConfig c;
  c.max_concurrent = concurrent;
  c.num_blocks = 256;
  c.overlap_steps = overlap;
  return c;
}

// Runs `requests` on one engine, all submitted at once, and returns each one's tokens.
std::vector<std::vector<int32_t>> run_all(EngineConfig::Overlap overlap, int32_t concurrent,
                                          const std::vector<GenerationRequest>& requests,
                                          std::vector<FinishReason>* finishes = nullptr) {
  auto& f = fixture();
  Engine engine(*f.model, config(overlap, concurrent));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : requests) streams.push_back(engine.submit(r));
  std::vector<std::vector<int32_t>> tokens;
  for (auto& s : streams) {
    RequestOutput last;
    tokens.push_back(collect(*s, &last));
    if (finishes) finishes->push_back(last.finish);
  }
  const auto st = idle_stats(engine);
  EXPECT_EQ(st.kv_blocks_free, st.kv_blocks_total) << "leaked KV blocks";
  EXPECT_EQ(f.backend.outstanding(), 0u) << "a read was never collected";
  EXPECT_EQ(st.overlapped_steps > 0, overlap == EngineConfig::Overlap::On);
  return tokens;
}

TEST(OverlappedDecoding, GivesTheTokensOfStepsReadOneByOne) {
  auto& f = fixture();
  std::vector<GenerationRequest> requests;
  for (uint32_t i = 0; i < 5; ++i) requests.push_back(request(i, 6 + 5 * static_cast<int32_t>(i), i % 2 == 1));
  for (int32_t concurrent : {1, 5}) {
    const auto plain = run_all(EngineConfig::Overlap::Off, concurrent, requests);
    EXPECT_EQ(f.backend.reads_started, 0) << "Off must read every step at once";
    const auto overlapped = run_all(EngineConfig::Overlap::On, concurrent, requests);
    for (size_t i = 0; i < requests.size(); ++i)
      EXPECT_EQ(overlapped[i], plain[i]) << "request " << i << ", " << concurrent << " at once";
    // One at a time (the others waiting for a full batch), every decode step of a request but its
    // first (after the prefill) is fed on the device: max_tokens - 2 rows each.
    if (concurrent == 1) {
      int64_t rows = 0;
      for (const auto& r : requests) rows += r.max_tokens - 2;
      EXPECT_EQ(f.backend.rows_fed_on_device, rows);
    }
    EXPECT_GT(f.backend.rows_fed_on_device, 0) << concurrent;
    EXPECT_EQ(f.backend.max_outstanding, 2) << "the next step is issued before the last one's tokens are read";
    f.backend.reads_started = f.backend.rows_fed_on_device = f.backend.max_outstanding = 0;
  }
}

TEST(OverlappedDecoding, StopsAtTheStopTokenAndDropsTheStepIssuedPastIt) {
  auto& f = fixture();
  const auto free_run = run_all(EngineConfig::Overlap::Off, 1, {request(11, 16, false)});
  ASSERT_EQ(free_run[0].size(), 16u);
  // Stop at the 6th token while a second request keeps the batch (and the overlap) going.
  auto stopped = request(11, 16, false);
  stopped.stop_token_ids = {free_run[0][5]};
  const std::vector<GenerationRequest> requests = {stopped, request(12, 20, true), request(13, 3, false)};
  std::vector<FinishReason> plain_finish, overlapped_finish;
  const auto plain = run_all(EngineConfig::Overlap::Off, 3, requests, &plain_finish);
  const auto overlapped = run_all(EngineConfig::Overlap::On, 3, requests, &overlapped_finish);
  EXPECT_EQ(overlapped, plain);
  EXPECT_EQ(overlapped_finish, plain_finish);
  const auto first_stop = std::find(free_run[0].begin(), free_run[0].end(), free_run[0][5]) - free_run[0].begin();
  EXPECT_EQ(overlapped[0].size(), static_cast<size_t>(first_stop + 1));
  EXPECT_EQ(overlapped_finish[0], FinishReason::Stop);
  EXPECT_EQ(overlapped[2].size(), 3u);
  EXPECT_EQ(overlapped_finish[2], FinishReason::Length);
  EXPECT_GT(f.backend.rows_fed_on_device, 0);
}

TEST(OverlappedDecoding, RequestsArrivingMidRunJoinAndGetTheirOwnTokens) {
  auto& f = fixture();
  const auto alone = run_all(EngineConfig::Overlap::Off, 1, {request(21, 12, false)});
  Engine engine(*f.model, config(EngineConfig::Overlap::On, 4));
  auto first = engine.submit(request(20, 40, false));
  ASSERT_TRUE(first->next(std::chrono::seconds(60)).has_value());  // decoding, overlapped
  auto second = engine.submit(request(21, 12, false));
  EXPECT_EQ(collect(*second), alone[0]);
  collect(*first);
  const auto st = idle_stats(engine);
  EXPECT_EQ(st.kv_blocks_free, st.kv_blocks_total);
  EXPECT_EQ(f.backend.outstanding(), 0u);
}

TEST(OverlappedDecoding, CancellingWhileAStepIsAheadReturnsEveryBlock) {
  auto& f = fixture();
  Engine engine(*f.model, config(EngineConfig::Overlap::On, 4));
  auto keep = engine.submit(request(30, 30, false));
  auto dropped = engine.submit(request(31, 500, false));
  ASSERT_TRUE(dropped->next(std::chrono::seconds(60)).has_value());
  dropped.reset();  // the client goes away mid-run
  EXPECT_EQ(collect(*keep).size(), 30u);
  const auto st = idle_stats(engine);
  EXPECT_EQ(st.requests_cancelled, 1u);
  EXPECT_EQ(st.kv_blocks_free, st.kv_blocks_total);
  EXPECT_EQ(f.backend.outstanding(), 0u);
}

// A hybrid model (Qwen3-Next: recurrent state with block snapshots, rolled forward by each step):
// the step issued ahead advances a sequence's state before the step before it is processed, and
// one issued past a request's stop writes state nobody reads. Two waves of requests sharing a
// prompt prefix (the second served from the prefix cache and its state snapshots), greedy.
TEST(OverlappedDecoding, HybridModelsGiveTheTokensOfStepsReadOneByOne) {
  const std::string hybrid = std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/hf/qwen3_next";
  LateReadBackend backend;
  const auto model = model::load_model(hybrid, backend);
  const auto golden = io::Checkpoint::open_file(hybrid + "/golden.safetensors");
  const auto& ids = golden.get("input_ids_2");
  const auto* p = static_cast<const int64_t*>(ids.data);
  std::vector<std::vector<int32_t>> prompts;
  std::mt19937 rng(4);
  for (int i = 0; i < 6; ++i) {  // a shared 64-token prefix, then different tails
    std::vector<int32_t> prompt(p, p + 64);
    for (int j = 0; j < 2 + 7 * i; ++j) prompt.push_back(static_cast<int32_t>(rng() % 512));
    prompts.push_back(prompt);
  }
  auto run = [&](EngineConfig::Overlap overlap) {
    Engine engine(*model, {.max_concurrent = 3, .num_blocks = 256, .overlap_steps = overlap});
    std::vector<std::vector<int32_t>> tokens;
    std::vector<int32_t> cached;
    for (size_t wave = 0; wave < 2; ++wave) {
      std::vector<std::shared_ptr<RequestStream>> streams;
      for (size_t i = 3 * wave; i < 3 * wave + 3; ++i) {
        GenerationRequest r;
        r.prompt = prompts[i];
        r.sampling.temperature = 0;
        r.max_tokens = 10 + 9 * static_cast<int32_t>(i % 3);
        streams.push_back(engine.submit(r));
      }
      for (auto& st : streams) {
        RequestOutput last;
        tokens.push_back(collect(*st, &last));
        cached.push_back(last.num_cached_prompt_tokens);
      }
    }
    const auto st = idle_stats(engine);
    EXPECT_EQ(st.kv_blocks_free, st.kv_blocks_total) << "leaked KV blocks";
    EXPECT_EQ(backend.outstanding(), 0u);
    return std::pair{tokens, cached};
  };
  const auto [plain, plain_cached] = run(EngineConfig::Overlap::Off);
  backend.rows_fed_on_device = 0;
  const auto [overlapped, overlapped_cached] = run(EngineConfig::Overlap::On);
  EXPECT_EQ(overlapped, plain);
  // Within the first wave a hit depends on whether the first request's prefill was done when the
  // others were admitted (a race with the submitting thread); the second wave is submitted after
  // the first finished, so each of its requests must be served from the cache in both runs.
  for (size_t i = 3; i < 6; ++i) {
    EXPECT_GT(plain_cached[i], 0) << "request " << i << ": no prefix cache hit read first";
    EXPECT_EQ(overlapped_cached[i], plain_cached[i]) << "request " << i;
  }
  EXPECT_GT(backend.rows_fed_on_device, 0) << "hybrid steps were not overlapped";
}

}  // namespace
}  // namespace tachyon::engine
