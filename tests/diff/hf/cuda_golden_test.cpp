// The demo model's greedy output on CPU vs CUDA. (The Hugging Face golden fixtures run on
// CUDA through hf_golden_test.cpp and dynamic_rope_test.cpp, compiled into this binary for the
// "cuda" device: golden_device.h.) Skips when no GPU is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include <unistd.h>

#include "base/dtype.h"
#include "engine/engine.h"
#include "kernels/cuda/cuda_backend.h"
#include "model_runner.h"

namespace tachyon::testing {
namespace {

constexpr double kBf16LogitTolerance = 2e-2;

bool have_gpu() { return kernels::cuda_device_count() > 0; }

// Greedy decode steps (`tokens`, the logits that chose them) against one prefill of the prompt and
// the first steps - 1 tokens (`full`, computed here when empty): row prompt.size() - 1 + i chose
// token i, bit for bit.
void expect_steps_match_prefill(ModelRunner& runner, const std::vector<int32_t>& prompt,
                                const std::vector<int32_t>& tokens, const std::vector<float>& logits,
                                std::vector<float> full = {}) {
  if (full.empty()) {
    std::vector<int32_t> text = prompt;
    text.insert(text.end(), tokens.begin(), tokens.end() - 1);
    full = runner.full_logits(text);
  }
  const size_t v = static_cast<size_t>(runner.vocab());
  for (size_t i = 0; i < tokens.size(); ++i)
    EXPECT_EQ(0, std::memcmp(full.data() + (prompt.size() - 1 + i) * v, logits.data() + i * v, v * sizeof(float)))
        << "step " << i;
}

// The demo model, 20 prompts x 64 greedy tokens on CPU and CUDA. Prompts are windows of the
// golden prompts and continuations (real text). A divergence passes only when the CPU's own
// logits show a near-tie between the two chosen tokens there (within the bf16 tolerance).
TEST(DemoCuda, GreedyMatchesCpuOrDivergesOnlyAtNearTies) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible";
  const std::string dir = std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo";
  const auto golden = io::Checkpoint::open_file(dir + "/golden.safetensors");
  std::vector<std::vector<int32_t>> texts;
  for (const std::string p : {"code", "chat"}) {
    auto ids = read_ids(golden, p + ".input_ids");
    const auto more = read_ids(golden, p + ".greedy_tokens");
    ids.insert(ids.end(), more.begin(), more.end());
    texts.push_back(ids);
  }
  ModelRunner cpu(dir, "cpu"), gpu(dir, "cuda");
  int identical = 0, near_ties = 0;
  for (int i = 0; i < 20; ++i) {
    const auto& text = texts[i % 2];
    const size_t len = 3 + static_cast<size_t>(i * 7) % 24, start = static_cast<size_t>(i * 5) % (text.size() - len);
    const std::vector<int32_t> prompt(text.begin() + static_cast<long>(start), text.begin() + static_cast<long>(start + len));
    const auto [ct, cl] = cpu.greedy(prompt, 64);
    const auto [gt, gl] = gpu.greedy(prompt, 64);
    if (ct == gt) {
      ++identical;
      continue;
    }
    size_t t = 0;
    while (ct[t] == gt[t]) ++t;
    const size_t v = static_cast<size_t>(cpu.vocab());
    const float* row = cl.data() + t * v;
    float scale = 0;
    for (size_t j = 0; j < v; ++j) scale = std::max(scale, std::fabs(row[j]));
    const float gap = row[ct[t]] - row[gt[t]];
    std::printf("prompt %d: first divergence at token %zu: cpu %d vs cuda %d, cpu logit gap %.5f (%.2e of max|logit|)\n",
                i, t, ct[t], gt[t], gap, gap / scale);
    EXPECT_LE(gap, kBf16LogitTolerance * scale) << "prompt " << i << " diverges at token " << t << " without a near-tie";
    ++near_ties;
  }
  std::printf("demo greedy: %d/20 prompts identical over 64 tokens, %d diverge at near-ties\n", identical, near_ties);
  RecordProperty("identical_prompts", identical);
}

}  // namespace
}  // namespace tachyon::testing

namespace tachyon::testing {
namespace {

// CUDA graphs (step_graph.h) replay recorded steps; a replay must give exactly the bits of
// issuing the same ops one by one. 200 greedy steps stay within one band of the decode
// attention's chunk count (rounded up to a power of two from 8: the key changes at 512 tokens),
// so all but the first sightings replay one graph: a key that changes from step to step (an
// argument staged outside its op's recording scope, say) shows as captures here. A batch of 3
// sequences adds another shape.
TEST(CudaGraphs, ReplayedStepsGiveTheBitsOfDirectIssue) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible";
  const std::string demo = std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo";
  ModelRunner runner(demo, "cuda");
  const std::vector<int32_t> prompt = {2, 7806, 1717, 334, 65, 4900, 288, 964, 1681, 484};
  kernels::cuda_graphs_enable(*runner.backend, false);
  const auto direct = runner.greedy(prompt, 200);
  const auto before = kernels::cuda_graph_counters(*runner.backend);
  kernels::cuda_graphs_enable(*runner.backend, true);
  const auto graphed = runner.greedy(prompt, 200);
  const auto after = kernels::cuda_graph_counters(*runner.backend);
  EXPECT_EQ(direct.first, graphed.first);
  ASSERT_EQ(direct.second.size(), graphed.second.size());
  EXPECT_EQ(0, std::memcmp(direct.second.data(), graphed.second.data(), direct.second.size() * sizeof(float)));
  EXPECT_EQ(after.capture_failures, 0u);
  EXPECT_GE(after.replays - before.replays, 190u) << "steady decode should replay one graph";
  EXPECT_LE(after.captures - before.captures, 3u) << "the decode step's graph key changed between steps";
  std::printf("graphs: %llu replays, %llu captures, %llu direct\n",
              static_cast<unsigned long long>(after.replays - before.replays),
              static_cast<unsigned long long>(after.captures - before.captures),
              static_cast<unsigned long long>(after.direct - before.direct));

  // Three sequences decoding together, graphs on vs off.
  auto batch_run = [&](bool graphs) {
    kernels::cuda_graphs_enable(*runner.backend, graphs);
    std::vector<kv::SeqId> seqs;
    std::vector<std::vector<int32_t>> feeds;
    for (int s = 0; s < 3; ++s) {
      seqs.push_back(runner.kv->add_sequence());
      feeds.push_back(std::vector<int32_t>(prompt.begin(), prompt.begin() + 4 + 2 * s));
    }
    std::vector<int32_t> pos(3, 0);
    std::vector<float> all;
    for (int step = 0; step < 40; ++step) {
      model::Batch batch;
      for (int s = 0; s < 3; ++s) {
        runner.kv->reserve(seqs[s], pos[s] + static_cast<int32_t>(feeds[s].size()));
        batch.add(seqs[s], feeds[s], pos[s], model::LogitRows::Last);
      }
      const auto out = runner.model->forward(batch, *runner.kv);
      all.insert(all.end(), out.logits.begin(), out.logits.end());
      for (int s = 0; s < 3; ++s) {
        pos[s] += static_cast<int32_t>(feeds[s].size());
        const float* row = out.logits.data() + s * runner.vocab();
        feeds[s] = {static_cast<int32_t>(std::max_element(row, row + runner.vocab()) - row)};
      }
    }
    for (auto seq : seqs) runner.kv->remove_sequence(seq);
    return all;
  };
  const auto batch_direct = batch_run(false), batch_graphed = batch_run(true);
  ASSERT_EQ(batch_direct.size(), batch_graphed.size());
  EXPECT_EQ(0, std::memcmp(batch_direct.data(), batch_graphed.data(), batch_direct.size() * sizeof(float)));
}

}  // namespace
}  // namespace tachyon::testing

namespace tachyon::testing {
namespace {

// A random Qwen3 checkpoint wide enough for the decode path's fused norms (hidden 1024: the
// norm kernel's wide path; gate_up 8192 x 1024: the streaming matmul at one row).
std::string write_wide_qwen3(const std::filesystem::path& dir) {
  const int64_t hidden = 1024, inter = 4096, heads = 16, kv_heads = 4, head_dim = 64, vocab = 1024, layers = 2;
  std::filesystem::create_directories(dir);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 0.02f);
  std::vector<std::vector<uint16_t>> storage;
  std::vector<io::TensorToWrite> tensors;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float mean, float stddev) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (auto& e : v) e = f32_to_bf16(mean + stddev / 0.02f * normal(rng));
    storage.push_back(std::move(v));
    tensors.push_back({name, DType::BF16, shape, storage.back().data()});
  };
  storage.reserve(64);
  add("model.embed_tokens.weight", {vocab, hidden}, 0.f, 0.5f);
  add("model.norm.weight", {hidden}, 1.f, 0.1f);
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {hidden}, 1.f, 0.1f);
    add(p + "post_attention_layernorm.weight", {hidden}, 1.f, 0.1f);
    add(p + "self_attn.q_proj.weight", {heads * head_dim, hidden}, 0.f, 0.02f);
    add(p + "self_attn.k_proj.weight", {kv_heads * head_dim, hidden}, 0.f, 0.02f);
    add(p + "self_attn.v_proj.weight", {kv_heads * head_dim, hidden}, 0.f, 0.02f);
    add(p + "self_attn.o_proj.weight", {hidden, heads * head_dim}, 0.f, 0.02f);
    add(p + "self_attn.q_norm.weight", {head_dim}, 1.f, 0.1f);
    add(p + "self_attn.k_norm.weight", {head_dim}, 1.f, 0.1f);
    add(p + "mlp.gate_proj.weight", {inter, hidden}, 0.f, 0.02f);
    add(p + "mlp.up_proj.weight", {inter, hidden}, 0.f, 0.02f);
    add(p + "mlp.down_proj.weight", {hidden, inter}, 0.f, 0.02f);
  }
  io::write_safetensors((dir / "model.safetensors").string(), tensors);
  std::ofstream(dir / "config.json") << R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
    "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 2, "num_attention_heads": 16,
    "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 1024, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "max_position_embeddings": 4096, "tie_word_embeddings": true,
    "hidden_act": "silu", "attention_bias": false})";
  return dir.string();
}

// Decode steps with the residual add + norm computed inside the streaming matmul give the bits
// of the unfused steps (CudaOptions::fused_norm_rows 0) and of the
// prefill rows that run the same positions at once (the tiled kernels, norm launched alone).
TEST(CudaFusedNorm, DecodeStepsGiveTheBitsOfUnfusedStepsAndOfPrefill) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible";
  const std::string dir =
      write_wide_qwen3(std::filesystem::temp_directory_path() / ("tachyon-wide-qwen3-" + std::to_string(::getpid())));
  const std::vector<int32_t> prompt = {5, 900, 17, 333, 1000, 64, 2, 750};
  const int steps = 24;
  ModelRunner fused(dir, "cuda");
  const auto [tokens, logits] = fused.greedy(prompt, steps);
  EXPECT_GT(kernels::cuda_fused_norm_launches(*fused.backend), static_cast<uint64_t>(steps - 1));
  kernels::CudaOptions unfused;
  unfused.fused_norm_rows = 0;
  ModelRunner plain(dir, kernels::make_cuda_backend(unfused));
  const auto [plain_tokens, plain_logits] = plain.greedy(prompt, steps);
  EXPECT_EQ(kernels::cuda_fused_norm_launches(*plain.backend), 0u);
  EXPECT_EQ(tokens, plain_tokens);
  ASSERT_EQ(logits.size(), plain_logits.size());
  EXPECT_EQ(0, std::memcmp(logits.data(), plain_logits.data(), logits.size() * sizeof(float)));
  expect_steps_match_prefill(fused, prompt, tokens, logits);
  std::filesystem::remove_all(dir);
}

// The prefill fusions: the gated MLP (the gate_up GEMM's epilogue writes the down GEMM's input)
// and add_rms_norm writing the next matmul's input. A 100-token prefill gives the bits of the same
// model with both fusions off (CudaOptions), and its decode steps the bits of
// the prefill's rows over the same positions.
TEST(CudaPrefillFusions, PrefillGivesTheBitsOfTheUnfusedOpsAndOfDecodeSteps) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible";
  const std::string dir = write_wide_qwen3(std::filesystem::temp_directory_path() /
                                           ("tachyon-wide-qwen3-mlp-" + std::to_string(::getpid())));
  std::vector<int32_t> prompt;
  for (int i = 0; i < 100; ++i) prompt.push_back((i * 37 + 5) % 1000);
  const int steps = 8;
  ModelRunner fused(dir, "cuda");
  const auto [tokens, logits] = fused.greedy(prompt, steps);
  std::vector<int32_t> text = prompt;
  text.insert(text.end(), tokens.begin(), tokens.end() - 1);
  const auto full = fused.full_logits(text);
  EXPECT_GE(kernels::cuda_fused_gated_mlps(*fused.backend), 4u);  // two layers, two prefills
  EXPECT_GE(kernels::cuda_fused_prefill_norms(*fused.backend), 4u);   // at least the post-attention norms
  kernels::CudaOptions unfused;
  unfused.gated_mlp_fusion = false;
  unfused.prefill_norm_fusion = false;
  ModelRunner plain(dir, kernels::make_cuda_backend(unfused));
  const auto plain_full = plain.full_logits(text);
  EXPECT_EQ(kernels::cuda_fused_gated_mlps(*plain.backend), 0u);
  EXPECT_EQ(kernels::cuda_fused_prefill_norms(*plain.backend), 0u);
  ASSERT_EQ(full.size(), plain_full.size());
  EXPECT_EQ(0, std::memcmp(full.data(), plain_full.data(), full.size() * sizeof(float)));
  expect_steps_match_prefill(fused, prompt, tokens, logits, full);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tachyon::testing

namespace tachyon::testing {
namespace {

// A request's tokens, to its finish.
std::vector<int32_t> stream_tokens(engine::RequestStream& stream) {
  std::vector<int32_t> tokens;
  for (;;) {
    auto out = stream.next(std::chrono::seconds(120));
    if (!out) {
      ADD_FAILURE() << "timed out";
      return tokens;
    }
    tokens.insert(tokens.end(), out->tokens.begin(), out->tokens.end());
    if (out->finish != engine::FinishReason::None) return tokens;
  }
}

// Once the engine is idle (it updates its stats after the last delivery): every KV block is free.
void expect_every_block_back(const engine::Engine& engine) {
  for (int i = 0; i < 500 && engine.stats().running > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto st = engine.stats();
  EXPECT_EQ(st.kv_blocks_free, st.kv_blocks_total) << "leaked KV blocks";
}

// Overlapped decoding on the GPU (engine/engine.cpp issue_ahead): each step is issued before the
// last one's tokens are read (Backend::copy_to_host_later: an event behind the copy, the step
// graphs' staging in two banks), its rows reading those tokens on the device. 3 sequences x 120
// greedy steps, overlapped vs each step read first: the same tokens, the overlapped steps replayed
// as graphs (one per staging bank and context band), and the host never more than one step
// behind. Then the engine on the demo model, overlap on vs off, greedy and sampled requests of
// different lengths and a stop token: the same tokens, every KV block back.
TEST(CudaOverlap, StepsIssuedBeforeTheLastOnesTokensAreReadGiveTheSameTokens) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible";
  const std::string demo = std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo";
  ModelRunner runner(demo, "cuda");
  const std::vector<int32_t> prompt = {2, 7806, 1717, 334, 65, 4900, 288, 964, 1681, 484};
  auto run = [&](bool overlapped) {
    std::vector<kv::SeqId> seqs;
    std::vector<int32_t> pos;
    model::Batch batch;
    for (int s = 0; s < 3; ++s) {
      seqs.push_back(runner.kv->add_sequence());
      const std::vector<int32_t> p(prompt.begin(), prompt.begin() + 4 + 2 * s);
      runner.kv->reserve(seqs[s], static_cast<int32_t>(p.size()));
      batch.add(seqs[s], p, 0, model::LogitRows::Last);
      pos.push_back(static_cast<int32_t>(p.size()));
    }
    batch.outputs = model::StepOutputs::argmax();
    model::StepOutput out = runner.model->forward(batch, *runner.kv);
    std::vector<std::vector<int32_t>> tokens(3);
    for (int s = 0; s < 3; ++s) tokens[s].push_back(out.argmax[s]);
    for (int step = 0; step < 120; ++step) {
      batch.clear();
      static constexpr int32_t kOnDevice = 0;
      for (int s = 0; s < 3; ++s) {
        runner.kv->reserve(seqs[s], pos[s] + 1);
        batch.add(seqs[s], std::span<const int32_t>(overlapped ? &kOnDevice : &tokens[s].back(), 1), pos[s]++,
                  model::LogitRows::Last);
      }
      batch.outputs = model::StepOutputs::argmax(/*read_later=*/overlapped);
      if (overlapped) batch.device_tokens = out.device_ids;
      model::StepOutput next;
      {
        const kernels::RepeatingStepHint hint(*runner.backend, true);
        next = runner.model->forward(batch, *runner.kv);
      }
      EXPECT_EQ(next.tokens_pending, overlapped);
      model::collect_tokens(*runner.backend, out);  // the step before: it ran while this one was issued
      if (overlapped && step > 0)
        for (int s = 0; s < 3; ++s) tokens[s].push_back(out.argmax[s]);
      out = std::move(next);
      if (!overlapped)
        for (int s = 0; s < 3; ++s) tokens[s].push_back(out.argmax[s]);
    }
    model::collect_tokens(*runner.backend, out);
    if (overlapped)
      for (int s = 0; s < 3; ++s) tokens[s].push_back(out.argmax[s]);
    for (auto seq : seqs) runner.kv->remove_sequence(seq);
    return tokens;
  };
  const auto read_first = run(false);
  const auto before = kernels::cuda_graph_counters(*runner.backend);
  const auto overlapped = run(true);
  const auto after = kernels::cuda_graph_counters(*runner.backend);
  EXPECT_EQ(overlapped, read_first);
  EXPECT_EQ(after.capture_failures, 0u);
  EXPECT_GE(after.replays - before.replays, 110u) << "overlapped steps should replay their graphs";
  EXPECT_LE(after.captures - before.captures, 6u) << "a staging bank's step key changed between steps";

  // Through the engine, overlap on vs off.
  auto engine_run = [&](engine::EngineConfig::Overlap overlap) {
    engine::Engine engine(*runner.model, {.max_concurrent = 4, .num_blocks = 128, .overlap_steps = overlap});
    std::vector<std::shared_ptr<engine::RequestStream>> streams;
    for (int i = 0; i < 4; ++i) {
      engine::GenerationRequest r;
      r.prompt.assign(prompt.begin(), prompt.begin() + 3 + i);
      r.max_tokens = 20 + 15 * i;
      r.sampling.temperature = i % 2 ? 0.8f : 0.f;
      r.sampling.seed = 7 + i;
      if (i == 2) r.stop_token_ids = {read_first[0][6]};
      streams.push_back(engine.submit(r));
    }
    std::vector<std::vector<int32_t>> tokens;
    for (auto& s : streams) tokens.push_back(stream_tokens(*s));
    expect_every_block_back(engine);
    return tokens;
  };
  EXPECT_EQ(engine_run(engine::EngineConfig::Overlap::On), engine_run(engine::EngineConfig::Overlap::Off));
}

// A hybrid model (Qwen3-Next fixture: recurrent state and its block snapshots on the GPU) through the
// engine, overlap on vs off: three requests at once, then three more sharing their 64-token prompt
// prefix (served from the prefix cache), greedy. The same tokens, every KV block back.
TEST(CudaOverlap, HybridModelGivesTheSameTokensOverlapped) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible";
  const std::string hybrid = std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/hf/qwen3_next";
  ModelRunner runner(hybrid, "cuda");
  const auto golden = io::Checkpoint::open_file(hybrid + "/golden.safetensors");
  const auto base = read_ids(golden, "input_ids_2");
  auto run = [&](engine::EngineConfig::Overlap overlap) {
    engine::Engine engine(*runner.model, {.max_concurrent = 3, .num_blocks = 128, .overlap_steps = overlap});
    std::vector<std::vector<int32_t>> tokens;
    for (int wave = 0; wave < 2; ++wave) {
      std::vector<std::shared_ptr<engine::RequestStream>> streams;
      for (int i = 3 * wave; i < 3 * wave + 3; ++i) {
        engine::GenerationRequest r;
        r.prompt.assign(base.begin(), base.begin() + 64);
        for (int j = 0; j < 2 + 7 * i; ++j) r.prompt.push_back((37 * j + 11 * i) % 512);
        r.max_tokens = 10 + 9 * (i % 3);
        r.sampling.temperature = 0;
        streams.push_back(engine.submit(r));
      }
      for (auto& s : streams) tokens.push_back(stream_tokens(*s));
    }
    expect_every_block_back(engine);
    return tokens;
  };
  const auto on = run(engine::EngineConfig::Overlap::On), off = run(engine::EngineConfig::Overlap::Off);
  EXPECT_EQ(on, off);
  for (size_t i = 0; i < on.size(); ++i) EXPECT_EQ(on[i].size(), static_cast<size_t>(10 + 9 * (i % 3))) << i;
}

// Sliding-window models (tiny Gemma 3 and gpt-oss checkpoints, window 8) on the GPU with their
// sliding layers' blocks released once out of the window (EngineConfig::release_sliding_blocks):
// the greedy tokens of the cache that keeps every block, with overlapped steps on and off, two
// waves of requests sharing a 40-token prefix (the second served from the prefix cache), contexts
// of 11 to 15 windows; the sliding blocks in use bounded, every block back.
TEST(CudaSlidingWindow, ReleasedBlocksGiveTheTokensOfTheUnboundedCache) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible";
  for (const char* fixture : {"gemma3_text", "gpt_oss"}) {
    ModelRunner runner(std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/hf/" + fixture, "cuda");
    std::mt19937 rng(5);
    std::vector<int32_t> shared(40);
    for (auto& t : shared) t = static_cast<int32_t>(rng() % 512);
    auto run = [&](bool release, engine::EngineConfig::Overlap overlap, engine::EngineStats* stats) {
      engine::Engine engine(*runner.model, {.max_concurrent = 4, .max_tokens_per_step = 24, .block_size = 4,
                                            .num_blocks = 128, .release_sliding_blocks = release,
                                            .overlap_steps = overlap});
      std::vector<std::vector<int32_t>> tokens;
      for (int wave = 0; wave < 2; ++wave) {
        std::vector<std::shared_ptr<engine::RequestStream>> streams;
        for (int i = 3 * wave; i < 3 * wave + 3; ++i) {
          engine::GenerationRequest r;
          r.prompt = shared;
          for (int j = 0; j < 3 + 5 * i; ++j) r.prompt.push_back((31 * j + 7 * i) % 512);
          r.max_tokens = 48;
          r.sampling.temperature = 0;
          streams.push_back(engine.submit(r));
        }
        for (auto& s : streams) tokens.push_back(stream_tokens(*s));
      }
      expect_every_block_back(engine);
      if (stats) *stats = engine.stats();
      return tokens;
    };
    engine::EngineStats stats;
    const auto unbounded = run(false, engine::EngineConfig::Overlap::Off, nullptr);
    EXPECT_EQ(run(true, engine::EngineConfig::Overlap::On, &stats), unbounded) << fixture << ", overlapped";
    EXPECT_EQ(run(true, engine::EngineConfig::Overlap::Off, nullptr), unbounded) << fixture;
    EXPECT_GT(stats.prefix_cache_hit_tokens, 0u) << fixture;
    EXPECT_GT(stats.kv_sliding_blocks_total, 0) << fixture;
    // 4 windows and two steps' 24 tokens: an overlapped step reserves its blocks before the step
    // in flight commits and releases (measured 32 on an H100).
    EXPECT_LE(stats.kv_sliding_blocks_peak, 4 * (2 + 3) + 2 * 6) << fixture;
  }
}

}  // namespace
}  // namespace tachyon::testing
