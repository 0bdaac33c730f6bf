// The Hugging Face golden fixtures and the exactness tests on the CUDA backend, plus the demo
// model's greedy output on CPU vs CUDA. CUDA computes matmuls with bf16 operands, so logits
// are held to max|Δ| <= 2e-2 · max|ref| (issue 6) instead of the CPU's 1e-3; incremental and
// chunked prefill to 1e-5 and batch invariance to identical bits, as on the CPU. Skips when
// no GPU is visible.
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

std::string fixture(const std::string& arch) { return std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/hf/" + arch; }

bool have_gpu() { return kernels::cuda_device_count() > 0; }

class HfGoldenCuda : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible";
    runner_ = std::make_unique<ModelRunner>(fixture(GetParam()), "cuda");
    golden_ = std::make_unique<io::Checkpoint>(io::Checkpoint::open_file(fixture(GetParam()) + "/golden.safetensors"));
  }
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<io::Checkpoint> golden_;
};

TEST_P(HfGoldenCuda, LogitsAtEveryPositionMatchTransformers) {
  for (int i = 0; i < 3; ++i) {
    const auto ids = read_ids(*golden_, "input_ids_" + std::to_string(i));
    const double err = relative_error(runner_->full_logits(ids), read_f32(*golden_, "logits_" + std::to_string(i)));
    EXPECT_LE(err, kBf16LogitTolerance) << "input_ids_" << i << " (" << ids.size() << " tokens)";
    RecordProperty("max_rel_err_" + std::to_string(i), std::to_string(err));
  }
}

// Greedy continuations equal transformers', except that a divergence is accepted where the
// reference's own logits are a near-tie between the two tokens (gap within the bf16 logit
// tolerance): bf16 activations cannot order such pairs like float32 does. Up to the first
// divergence the decode-path logits must be within the tolerance.
TEST_P(HfGoldenCuda, GreedyContinuationMatchesTransformers) {
  for (int j = 0; j < 2; ++j) {
    const auto prompt = read_ids(*golden_, "input_ids_" + std::to_string(j));
    const auto expected = read_ids(*golden_, "greedy_" + std::to_string(j));
    const auto ref = read_f32(*golden_, "greedy_" + std::to_string(j) + "_logits");
    auto [tokens, logits] = runner_->greedy(prompt, static_cast<int>(expected.size()));
    const size_t v = static_cast<size_t>(runner_->vocab());
    size_t t = 0;
    while (t < tokens.size() && tokens[t] == expected[t]) ++t;
    const std::vector<float> agreed(logits.begin(), logits.begin() + static_cast<long>(std::min(t + 1, tokens.size()) * v));
    const std::vector<float> agreed_ref(ref.begin(), ref.begin() + static_cast<long>(agreed.size()));
    EXPECT_LE(relative_error(agreed, agreed_ref), kBf16LogitTolerance) << "greedy_" << j;
    if (t == tokens.size()) continue;
    const float* row = ref.data() + t * v;
    float scale = 0;
    for (size_t k = 0; k < v; ++k) scale = std::max(scale, std::fabs(row[k]));
    const float gap = row[expected[t]] - row[tokens[t]];
    std::printf("greedy_%d: first divergence at token %zu: expected %d, cuda %d; reference logit gap %.5f (%.2e of max|logit|)\n",
                j, t, expected[t], tokens[t], gap, gap / scale);
    EXPECT_LE(gap, kBf16LogitTolerance * scale) << "greedy_" << j << " diverges at token " << t << " without a near-tie";
    RecordProperty("greedy_" + std::to_string(j) + "_divergence", static_cast<int>(t));
  }
}

TEST_P(HfGoldenCuda, IncrementalDecodeReproducesFullSequence) {
  const auto ids = read_ids(*golden_, "input_ids_2");
  const auto full = runner_->full_logits(ids);
  std::vector<int> one_at_a_time(ids.size() - 4, 1);  // a short prefill, then single tokens
  one_at_a_time[0] = 5;
  EXPECT_LE(relative_error(runner_->chunked_logits(ids, one_at_a_time), full), 1e-5);
}

TEST_P(HfGoldenCuda, RandomChunkedPrefillReproducesFullSequence) {
  const auto ids = read_ids(*golden_, "input_ids_2");
  const auto full = runner_->full_logits(ids);
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<int> chunks;
    for (size_t left = ids.size(); left > 0;) {
      const int c = std::min<int>(static_cast<int>(left), 1 + static_cast<int>(rng() % 23));
      chunks.push_back(c);
      left -= static_cast<size_t>(c);
    }
    EXPECT_LE(relative_error(runner_->chunked_logits(ids, chunks), full), 1e-5) << "trial " << trial;
  }
}

// As HfGolden.BatchInvarianceIsBitExact, and also with the batch pushed past 64 rows so the
// sequence alone runs the skinny matmul and in the batch the tiled one.
TEST_P(HfGoldenCuda, BatchInvarianceIsBitExact) {
  const auto a = read_ids(*golden_, "input_ids_2");
  const auto b = read_ids(*golden_, "input_ids_1");
  const auto c = read_ids(*golden_, "input_ids_0");
  const auto alone = runner_->full_logits(a);
  auto& kv = *runner_->kv;
  for (int copies_of_b : {1, 6}) {
    auto seq_c = kv.add_sequence();
    kv.reserve(seq_c, static_cast<int32_t>(c.size()) + 1);
    {
      model::Batch pre;
      pre.add(seq_c, c, 0, model::LogitRows::None);
      runner_->model->forward(pre, kv);
    }
    std::vector<kv::SeqId> seq_b;
    model::Batch batch;
    for (int i = 0; i < copies_of_b; ++i) {
      seq_b.push_back(kv.add_sequence());
      kv.reserve(seq_b.back(), static_cast<int32_t>(b.size()));
      batch.add(seq_b.back(), b, 0, i == 0 ? model::LogitRows::All : model::LogitRows::None);
    }
    auto seq_a = kv.add_sequence();
    kv.reserve(seq_a, static_cast<int32_t>(a.size()));
    const int32_t next = 7;
    batch.add(seq_c, std::span<const int32_t>(&next, 1), static_cast<int32_t>(c.size()), model::LogitRows::Last);
    batch.add(seq_a, a, 0, model::LogitRows::All);
    auto out = runner_->model->forward(batch, kv);
    const size_t v = static_cast<size_t>(runner_->vocab());
    const size_t offset = (b.size() + 1) * v;
    ASSERT_EQ(out.logits.size(), offset + alone.size());
    std::vector<float> in_batch(out.logits.begin() + static_cast<long>(offset), out.logits.end());
    EXPECT_EQ(0, std::memcmp(in_batch.data(), alone.data(), alone.size() * sizeof(float)))
        << batch.num_rows() << " rows, max diff " << relative_error(in_batch, alone);
    kv.remove_sequence(seq_a);
    for (auto s : seq_b) kv.remove_sequence(s);
    kv.remove_sequence(seq_c);
  }
  EXPECT_EQ(kv.pool().num_free(), kv.pool().num_blocks()) << "blocks leaked";
}

INSTANTIATE_TEST_SUITE_P(Architectures, HfGoldenCuda, ::testing::Values("llama", "qwen2", "qwen3", "mistral"),
                         [](const auto& info) { return info.param; });

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
