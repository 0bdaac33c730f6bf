// The demo model's greedy output on CPU vs CUDA. (The Hugging Face golden fixtures run on
// CUDA through hf_golden_test.cpp and dynamic_rope_test.cpp, compiled into this binary for the
// "cuda" device: golden_device.h.) Skips when no GPU is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "kernels/cuda/cuda_backend.h"
#include "model_runner.h"

namespace tachyon::testing {
namespace {

constexpr double kBf16LogitTolerance = 2e-2;

bool have_gpu() { return kernels::cuda_device_count() > 0; }

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
// issuing the same ops one by one. 200 greedy steps cross several 64-token attention chunk
// bands (new graph keys) and replay within each; a batch of 3 sequences adds another shape.
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
  EXPECT_GT(after.replays - before.replays, 150u) << "steady decode should replay graphs";
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
