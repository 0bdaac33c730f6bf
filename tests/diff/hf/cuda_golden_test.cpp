// The demo model's greedy output on CPU vs CUDA. (The Hugging Face golden fixtures run on
// CUDA through hf_golden_test.cpp and dynamic_rope_test.cpp, compiled into this binary for the
// "cuda" device: golden_device.h.) Skips when no GPU is visible.
#include <gtest/gtest.h>

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
