// PFlash through the engine on the demo model: a compressed request's kept tokens get KV and
// nothing else, at the positions of the uncompressed prompt (its tokens equal those of a
// direct forward with those RoPE positions) or compacted ones; usage and stats say what was
// dropped; requests that need their prompt intact, short prompts under auto, and per-request
// overrides go the way they say; original-position blocks never enter the prefix cache.
// PflashEngineCuda: the same on a CUDA device (skipped without one; bench/cuda/run_cuda_tests.sh
// runs them there), with both scorers, the attention scorer's drafter on the GPU too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "engine/engine.h"
#include "engine/pflash_attention.h"
#include "engine/pflash_lexical.h"
#include "demo_runs.h"
#include "engine_test_helpers.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "pflash_needles.h"

namespace tachyon::engine {
namespace {

using test_helpers::collect;
using test_helpers::idle_stats;

using testing_demo::kDemo;

struct Fixture {
  std::unique_ptr<kernels::Backend> backend = kernels::make_backend("cpu");
  std::unique_ptr<model::Model> model = model::load_model(kDemo, *backend);
  tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_model_dir(kDemo);
  std::vector<int32_t> prompt =
      pflash_test::needle_prompt(tok, 1500, "The access code for the Zephyr vault is 4158-GLACIER.", 0.5,
                                 "What is the access code for the Zephyr vault?")
          .tokens;
};
Fixture& fixture() {
  static Fixture f;
  return f;
}

PflashConfig small_shape(PflashMode mode, PflashPositions positions = PflashPositions::Original) {
  return {.mode = mode, .threshold = 1000, .keep_ratio = 0.3, .sink = 32, .tail = 64, .block = 64,
          .positions = positions};
}

EngineConfig engine_config(const PflashConfig& pflash) {
  return {.max_concurrent = 2, .num_blocks = 512, .kv_format = kernels::KvFormat::F32, .pflash = pflash};
}

GenerationRequest request(const std::vector<int32_t>& prompt, int32_t max_tokens = 6) {
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.f;  // greedy: comparable with direct_greedy
  return r;
}

// Greedy tokens of a direct forward over `tokens` with RoPE positions `rope` and decode steps
// after them at rope.back() + 1, ...
std::vector<int32_t> direct_greedy(model::Model& model, const std::vector<int32_t>& tokens,
                                   const std::vector<int32_t>& rope, int32_t steps) {
  kv::KvCache kv(model.backend(), model.kv_layout(256));
  const kv::SeqId seq = kv.add_sequence();
  std::vector<int32_t> out;
  int32_t position = 0, rope_position = rope.back() + 1;
  std::vector<int32_t> feed = tokens;
  for (int32_t s = 0; s < steps; ++s) {
    EXPECT_TRUE(kv.reserve(seq, position + static_cast<int32_t>(feed.size())));
    model::Batch batch;
    batch.add(seq, feed, position, model::LogitRows::Last);
    batch.rope_positions = s == 0 ? rope : std::vector<int32_t>{rope_position++};
    batch.outputs = model::StepOutputs::argmax();
    const model::StepOutput o = model.forward(batch, kv);
    position += static_cast<int32_t>(feed.size());
    out.push_back(o.argmax.at(0));
    feed = {out.back()};
  }
  return out;
}

TEST(PflashEngine, Kept_tokens_keep_their_original_positions) {
  Fixture& f = fixture();
  LexicalScorer scorer;
  const PflashConfig config = small_shape(PflashMode::Always);
  const PflashPlan plan = plan_compression(f.prompt, config, scorer);
  ASSERT_TRUE(plan.compressed()) << plan.refused;
  std::vector<int32_t> kept;
  for (int32_t i : plan.kept) kept.push_back(f.prompt[static_cast<size_t>(i)]);

  Engine engine(*f.model, engine_config(config));
  RequestOutput last;
  const std::vector<int32_t> tokens = collect(*engine.submit(request(f.prompt)), &last);
  EXPECT_EQ(tokens, direct_greedy(*f.model, kept, plan.kept, 6));
  std::vector<int32_t> consecutive(kept.size());
  for (size_t i = 0; i < kept.size(); ++i) consecutive[i] = static_cast<int32_t>(i);
  EXPECT_NE(tokens, direct_greedy(*f.model, kept, consecutive, 6));  // the positions did matter
  EXPECT_EQ(last.num_prompt_tokens, static_cast<int32_t>(f.prompt.size()));
  EXPECT_EQ(last.num_dropped_prompt_tokens, static_cast<int32_t>(f.prompt.size() - kept.size()));
  const EngineStats st = idle_stats(engine);
  EXPECT_EQ(st.pflash_compressed, 1u);
  EXPECT_EQ(st.pflash_dropped_tokens, f.prompt.size() - kept.size());
  EXPECT_EQ(st.computed_prompt_tokens, kept.size());  // dropped tokens got no KV
  EXPECT_EQ(st.prompt_tokens, f.prompt.size());
}

// Overlapped decoding issues each decode step from the last one's device tokens (a separate
// batch): it must rotate by the same positions.
TEST(PflashEngine, Original_positions_hold_with_overlapped_decoding) {
  Fixture& f = fixture();
  LexicalScorer scorer;
  const PflashConfig config = small_shape(PflashMode::Always);
  const PflashPlan plan = plan_compression(f.prompt, config, scorer);
  ASSERT_TRUE(plan.compressed());
  std::vector<int32_t> kept;
  for (int32_t i : plan.kept) kept.push_back(f.prompt[static_cast<size_t>(i)]);
  EngineConfig ec = engine_config(config);
  ec.overlap_steps = EngineConfig::Overlap::On;
  Engine engine(*f.model, ec);
  EXPECT_EQ(collect(*engine.submit(request(f.prompt, 12))), direct_greedy(*f.model, kept, plan.kept, 12));
  EXPECT_GT(idle_stats(engine).overlapped_steps, 0u);  // the overlapped path ran
}

TEST(PflashEngine, Compacted_positions_run_the_kept_tokens_as_a_plain_prompt) {
  Fixture& f = fixture();
  LexicalScorer scorer;
  const PflashConfig config = small_shape(PflashMode::Always, PflashPositions::Compacted);
  const PflashPlan plan = plan_compression(f.prompt, config, scorer);
  ASSERT_TRUE(plan.compressed());
  std::vector<int32_t> kept, consecutive;
  for (int32_t i : plan.kept) {
    consecutive.push_back(static_cast<int32_t>(kept.size()));
    kept.push_back(f.prompt[static_cast<size_t>(i)]);
  }
  Engine engine(*f.model, engine_config(config));
  EXPECT_EQ(collect(*engine.submit(request(f.prompt))), direct_greedy(*f.model, kept, consecutive, 6));
  // The kept prompt is a plain prompt: a repeat is served from the prefix cache.
  RequestOutput last;
  collect(*engine.submit(request(f.prompt)), &last);
  EXPECT_GT(last.num_cached_prompt_tokens, 0);
}

TEST(PflashEngine, Original_position_blocks_stay_out_of_the_prefix_cache) {
  Fixture& f = fixture();
  Engine engine(*f.model, engine_config(small_shape(PflashMode::Always)));
  collect(*engine.submit(request(f.prompt)));
  RequestOutput last;
  collect(*engine.submit(request(f.prompt)), &last);
  EXPECT_EQ(last.num_cached_prompt_tokens, 0);
  EXPECT_GT(last.num_dropped_prompt_tokens, 0);  // compressed both times
}

TEST(PflashEngine, Rope_positions_change_what_the_model_computes) {
  Fixture& f = fixture();
  const std::vector<int32_t> tokens(f.prompt.begin(), f.prompt.begin() + 64);
  std::vector<int32_t> consecutive(64), spread(64);
  for (int32_t i = 0; i < 64; ++i) consecutive[i] = i, spread[i] = i < 32 ? i : i + 500;
  auto logits = [&](const std::vector<int32_t>& rope) {
    kv::KvCache kv(f.model->backend(), f.model->kv_layout(16));
    const kv::SeqId seq = kv.add_sequence();
    EXPECT_TRUE(kv.reserve(seq, 64));
    model::Batch batch;
    batch.add(seq, tokens, 0, model::LogitRows::Last);
    batch.rope_positions = rope;
    return f.model->forward(batch, kv).logits;
  };
  EXPECT_EQ(logits(consecutive), logits({}));  // the same positions: the same bits
  EXPECT_NE(logits(consecutive), logits(spread));
}

TEST(PflashEngine, Bypasses_and_overrides) {
  Fixture& f = fixture();
  Engine engine(*f.model, engine_config(small_shape(PflashMode::Auto)));
  RequestOutput last;
  GenerationRequest intact = request(f.prompt);
  intact.prompt_intact = true;  // response_format, or tools not asked to compress
  collect(*engine.submit(intact), &last);
  EXPECT_EQ(last.num_dropped_prompt_tokens, 0);
  const std::vector<int32_t> short_prompt(f.prompt.begin(), f.prompt.begin() + 900);  // under the threshold
  collect(*engine.submit(request(short_prompt)), &last);
  EXPECT_EQ(last.num_dropped_prompt_tokens, 0);
  GenerationRequest forced = request(short_prompt);
  forced.pflash = PflashMode::Always;  // the request asks: the threshold does not apply
  collect(*engine.submit(forced), &last);
  EXPECT_GT(last.num_dropped_prompt_tokens, 0);
  GenerationRequest off = request(f.prompt);
  off.pflash = PflashMode::Off;
  collect(*engine.submit(off), &last);
  EXPECT_EQ(last.num_dropped_prompt_tokens, 0);
  collect(*engine.submit(request(f.prompt)), &last);  // auto, over the threshold
  EXPECT_GT(last.num_dropped_prompt_tokens, 0);
  GenerationRequest logprobs = request(f.prompt);
  logprobs.prompt_logprobs = true;
  collect(*engine.submit(logprobs), &last);
  EXPECT_EQ(last.num_dropped_prompt_tokens, 0);
  const EngineStats st = idle_stats(engine);
  EXPECT_EQ(st.pflash_compressed, 2u);
  EXPECT_EQ(st.pflash_bypassed_intact, 2u);
  EXPECT_EQ(st.pflash_bypassed_short, 1u);
  EXPECT_EQ(st.pflash_refused, 0u);
}

TEST(PflashEngine, A_budget_without_a_middle_is_refused_and_counted) {
  Fixture& f = fixture();
  PflashConfig config = small_shape(PflashMode::Always);
  config.tail = 2048;  // longer than the prompt
  Engine engine(*f.model, engine_config(config));
  RequestOutput last;
  collect(*engine.submit(request(f.prompt)), &last);
  EXPECT_EQ(last.num_dropped_prompt_tokens, 0);
  EXPECT_EQ(idle_stats(engine).pflash_refused, 1u);
}

// A CPU backend that reports a device's memory (Backend::device_memory): a fixed total less
// the bytes it has allocated and not yet freed, as a GPU sizes the KV pool.
class MeteredBackend final : public kernels::CpuBackend {
 public:
  void* allocate(size_t bytes) override {
    void* p = CpuBackend::allocate(bytes);
    live_[p] = bytes;
    in_use_ += bytes;
    return p;
  }
  void deallocate(void* ptr) override {
    if (auto it = live_.find(ptr); it != live_.end()) {
      in_use_ -= it->second;
      live_.erase(it);
    }
    CpuBackend::deallocate(ptr);
  }
  std::optional<DeviceMemory> device_memory() override {
    return DeviceMemory{.free_bytes = kTotal - in_use_, .total_bytes = kTotal};
  }
  static constexpr size_t kTotal = size_t{1} << 30;

 private:
  std::map<void*, size_t> live_;
  size_t in_use_ = 0;
};

// On a device the attention scorer reads prompts beside the target: the KV pool, sized from the
// memory left after a warm-up, must leave room for the scorer's largest pass (its KV cache for
// a whole prompt when it reads in one forward, for one chunk otherwise), or the first long prompt
// runs the device out of memory (an H100 did: the scorer failed on every 32k-token prompt).
TEST(PflashEngine, TheKvPoolLeavesDeviceMemoryForTheScorersLargestPass) {
  MeteredBackend device;
  const auto model = model::load_model(kDemo, device);
  constexpr int32_t kContext = 2048;
  const auto pool = [&](PromptScorer* scorer) {
    EngineConfig ec{.max_concurrent = 2, .kv_format = kernels::KvFormat::F32, .max_context = kContext,
                    .pflash = small_shape(PflashMode::Auto)};
    ec.pflash_scorer = scorer;
    return Engine(*model, ec).kv_pool();
  };
  const auto drafter = [&] { return model::load_model(kDemo + "/drafter", device); };
  AttentionScorer whole(drafter(), {.chunk = 0});
  AttentionScorer chunked(drafter(), {.chunk = 256});
  // Weights are packed at a model's first forward and stay: every model runs once before the
  // baseline, which then holds all their weights.
  pool(nullptr);
  whole.hold_peak_memory(kContext);
  chunked.hold_peak_memory(kContext);
  const KvPoolSize baseline = pool(nullptr);
  const int64_t alone = baseline.bytes, pool_blocks = baseline.num_blocks;
  // What one forward of n tokens keeps in the scorer's KV cache.
  const auto scorer_kv_bytes = [&](int32_t n) {
    const int32_t blocks = (n + 15) / 16;
    return static_cast<int64_t>(whole.model().kv_layout(blocks, 16).bytes_per_block()) * blocks;
  };
  const int64_t left_for_whole = alone - pool(&whole).bytes, left_for_chunk = alone - pool(&chunked).bytes;
  // The pool shrinks by whole blocks of the target's: within one block of the scorer's cache.
  const int64_t target_block = alone / pool_blocks;
  EXPECT_GT(left_for_whole + target_block, scorer_kv_bytes(kContext));
  EXPECT_GT(left_for_chunk + target_block, scorer_kv_bytes(256));
  EXPECT_LT(left_for_chunk, left_for_whole);  // a chunked read needs one chunk's cache, not a prompt's
  // The lexical scorer takes no device memory.
  LexicalScorer lexical;
  EXPECT_EQ(pool(&lexical).bytes, alone);
}

// ---- The same on a CUDA device: the target and the scorer's drafter on the GPU (f32 KV, as
// direct_greedy's cache). The CPU runs of the same prompt and drafter are the reference for the
// attention probe, which reads the GPU's rotated q and k.

struct CudaFixture {
  std::unique_ptr<kernels::Backend> backend = kernels::make_backend("cuda");
  std::unique_ptr<model::Model> model = model::load_model(kDemo, *backend);
  AttentionScorer attention{load_drafter(*backend)};
  static std::unique_ptr<model::Model> load_drafter(kernels::Backend& backend) {
    const kernels::DraftWeights scope(backend);  // as `tachyon serve` loads a drafter
    return model::load_model(kDemo + "/drafter", backend);
  }
};
CudaFixture& cuda_fixture() {
  static CudaFixture f;
  return f;
}

class PflashEngineCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kernels::default_device() != "cuda") GTEST_SKIP() << "no CUDA device visible";
  }
};

// Runs `config` with `scorer` through a CUDA engine: its tokens must be those of a direct
// forward over the plan's kept tokens at their original positions, with the dropped tokens
// never computed.
void expect_compressed_run_on_cuda(const PflashConfig& config, PromptScorer& scorer) {
  Fixture& f = fixture();
  CudaFixture& g = cuda_fixture();
  const PflashPlan plan = plan_compression(f.prompt, config, scorer);
  ASSERT_TRUE(plan.compressed()) << plan.refused;
  std::vector<int32_t> kept;
  for (int32_t i : plan.kept) kept.push_back(f.prompt[static_cast<size_t>(i)]);
  EngineConfig ec = engine_config(config);
  ec.pflash_scorer = &scorer;
  Engine engine(*g.model, ec);
  RequestOutput last;
  const std::vector<int32_t> tokens = collect(*engine.submit(request(f.prompt)), &last);
  EXPECT_EQ(tokens, direct_greedy(*g.model, kept, plan.kept, 6));
  EXPECT_EQ(last.num_dropped_prompt_tokens, static_cast<int32_t>(f.prompt.size() - kept.size()));
  const EngineStats st = idle_stats(engine);
  EXPECT_EQ(st.pflash_compressed, 1u);  // the path engaged
  EXPECT_EQ(st.computed_prompt_tokens, kept.size());
  EXPECT_EQ(st.prompt_tokens, f.prompt.size());
}

TEST_F(PflashEngineCuda, Lexical_scorer_kept_tokens_keep_their_original_positions) {
  LexicalScorer scorer;
  expect_compressed_run_on_cuda(small_shape(PflashMode::Always), scorer);
}

TEST_F(PflashEngineCuda, Attention_scorer_on_the_gpu_compresses_a_request) {
  PflashConfig config{.mode = PflashMode::Always, .keep_ratio = 0.2};
  expect_compressed_run_on_cuda(config, cuda_fixture().attention);
}

// The probe on the GPU's q and k gives the CPU's token masses (to float rounding of a different
// matmul order), keeps the needle, and ranks the blocks alike.
TEST_F(PflashEngineCuda, Attention_probe_matches_the_cpu_and_keeps_the_needle) {
  Fixture& f = fixture();
  const tokenizer::Tokenizer& tok = f.tok;
  const pflash_test::NeedlePrompt p = pflash_test::needle_prompt(
      tok, 3000, "To open the Zephyr strongroom, type the combination 4158-GLACIER.", 0.5,
      "What is the access code for the Zephyr vault? Answer with the code only.");
  const PflashConfig config{.mode = PflashMode::Always, .keep_ratio = 0.2};
  AttentionScorer cpu(model::load_model(kDemo + "/drafter", *f.backend));  // full precision, as on the GPU
  const PflashPlan on_cpu = plan_compression(p.tokens, config, cpu);
  const PflashPlan on_gpu = plan_compression(p.tokens, config, cuda_fixture().attention);
  ASSERT_TRUE(on_gpu.compressed()) << on_gpu.refused;
  const std::vector<float>& a = cpu.last_token_peak();
  const std::vector<float>& b = cuda_fixture().attention.last_token_peak();
  ASSERT_EQ(a.size(), b.size());
  float worst = 0.f, largest = 0.f;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i])), largest = std::max(largest, a[i]);
  EXPECT_LE(worst, 0.02f * largest) << "the GPU's attention peaks differ from the CPU's";
  for (int32_t i = p.needle_begin; i < p.needle_end; ++i)
    EXPECT_TRUE(std::binary_search(on_gpu.kept.begin(), on_gpu.kept.end(), i)) << "needle token " << i << " dropped";
  size_t common = 0;
  for (int32_t i : on_gpu.kept) common += std::binary_search(on_cpu.kept.begin(), on_cpu.kept.end(), i);
  EXPECT_GE(common, on_cpu.kept.size() * 9 / 10) << "the GPU keeps other blocks than the CPU";
}

// The cheap read on the GPU (AttentionScorerOptions::layers, read_window): the read window
// reaches the GPU's attention (with 16 keys its peaks are the CPU's with that window, far from
// the full read's), the forward stops after the probed layers, and a 128-key window keeps the
// needle.
TEST_F(PflashEngineCuda, Cheap_read_engages_on_the_gpu_and_keeps_the_needle) {
  Fixture& f = fixture();
  kernels::Backend& cuda = *cuda_fixture().backend;
  const pflash_test::NeedlePrompt p = pflash_test::needle_prompt(
      f.tok, 3000, "To open the Zephyr strongroom, type the combination 4158-GLACIER.", 0.5,
      "What is the access code for the Zephyr vault? Answer with the code only.");
  const PflashConfig config{.mode = PflashMode::Always, .keep_ratio = 0.2};
  AttentionScorer cpu(model::load_model(kDemo + "/drafter", *f.backend), {.read_window = 16});
  AttentionScorer gpu(CudaFixture::load_drafter(cuda), {.read_window = 16});
  AttentionScorer gpu_full(CudaFixture::load_drafter(cuda), {.read_window = 0});
  for (AttentionScorer* s : {&cpu, &gpu, &gpu_full}) ASSERT_TRUE(plan_compression(p.tokens, config, *s).compressed());
  const std::vector<float>&a = cpu.last_token_peak(), &b = gpu.last_token_peak(), &full = gpu_full.last_token_peak();
  ASSERT_EQ(a.size(), b.size());
  float worst = 0.f, largest = 0.f, from_full = 0.f;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]));
    from_full = std::max(from_full, std::abs(full[i] - b[i]));
    largest = std::max(largest, a[i]);
  }
  EXPECT_LE(worst, 0.02f * largest) << "the GPU's windowed peaks differ from the CPU's";
  EXPECT_GT(from_full, 0.2f * largest) << "the read window did not reach the GPU's attention";
  AttentionScorer gpu_128(CudaFixture::load_drafter(cuda), {.read_window = 128});
  const PflashPlan on_gpu = plan_compression(p.tokens, config, gpu_128);
  ASSERT_TRUE(on_gpu.compressed()) << on_gpu.refused;
  for (int32_t i = p.needle_begin; i < p.needle_end; ++i)
    EXPECT_TRUE(std::binary_search(on_gpu.kept.begin(), on_gpu.kept.end(), i)) << "needle token " << i << " dropped";
  EXPECT_EQ(gpu_128.last_layers_run(), 2);
  AttentionScorer first_layer(CudaFixture::load_drafter(cuda), {.layers = 1});
  ASSERT_TRUE(plan_compression(p.tokens, config, first_layer).compressed());
  EXPECT_EQ(first_layer.last_layers_run(), 1);
}

}  // namespace
}  // namespace tachyon::engine
