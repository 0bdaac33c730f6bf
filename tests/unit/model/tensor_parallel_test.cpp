// Tensor parallelism on the CPU: the sharding plan (which tensor, which slice) without any
// device, and a fake multi-rank machine (CPU backends in threads, joined by a HostCollective)
// whose sharded forward must match the unsharded model: same greedy tokens, logits within the
// float32 bound of a changed summation order (o_proj and down_proj add per-rank partial sums).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <thread>

#include "base/dtype.h"
#include "base/error.h"
#include "io/config.h"
#include "kernels/backend.h"
#include "kernels/collective.h"
#include "model/model.h"
#include "model/shard_plan.h"
#include "model/sources/sharded_source.h"
#include "model/tensor_parallel_model.h"

namespace tachyon::model {
namespace {

const std::string kDemo = std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo";
std::string hf(const std::string& arch) { return std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/hf/" + arch; }

TEST(ShardPlan, SplitsProjectionsAndReplicatesTheRest) {
  const io::ModelConfig c = io::load_model_config(kDemo);  // 6 heads, 2 KV heads, intermediate 1024
  const ShardPlan plan = plan_tensor_parallel(c, 2);
  EXPECT_EQ(plan.rank_config.num_attention_heads, 3);
  EXPECT_EQ(plan.rank_config.num_key_value_heads, 1);
  EXPECT_EQ(plan.rank_config.intermediate_size, 512);
  EXPECT_EQ(plan.rank_config.head_dim, c.head_dim);
  EXPECT_EQ(plan.rank_config.hidden_size, c.hidden_size);
  const std::string p = "model.layers.3.";
  for (const char* t : {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                        "self_attn.q_proj.bias", "mlp.gate_proj.weight", "mlp.up_proj.weight"})
    EXPECT_EQ(plan.kind_of(p + t), ShardKind::Rows) << t;
  EXPECT_EQ(plan.kind_of(p + "self_attn.o_proj.weight"), ShardKind::Cols);
  EXPECT_EQ(plan.kind_of(p + "mlp.down_proj.weight"), ShardKind::Cols);
  EXPECT_EQ(plan.kind_of(p + "self_attn.o_proj.bias"), ShardKind::FirstRank);
  for (const char* t : {"model.embed_tokens.weight", "lm_head.weight", "model.norm.weight",
                        "model.layers.0.input_layernorm.weight", "model.layers.0.self_attn.q_norm.weight"})
    EXPECT_EQ(plan.kind_of(t), ShardKind::Replicate) << t;
  EXPECT_EQ(plan_tensor_parallel(c, 1).kind_of(p + "mlp.down_proj.weight"), ShardKind::Replicate);
  EXPECT_EQ(ShardPlan::range(1024, 2, 1), (std::pair<int64_t, int64_t>{512, 1024}));
}

TEST(ShardPlan, RefusesWhatDoesNotSplitNamingIt) {
  const io::ModelConfig demo = io::load_model_config(kDemo);
  try {
    plan_tensor_parallel(demo, 3);  // 6 heads, 2 KV heads
    FAIL() << "3 ranks accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_key_value_heads (2) divisible by 3"), std::string::npos) << e.what();
  }
  try {
    plan_tensor_parallel(demo, 4);
    FAIL() << "4 ranks accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_attention_heads (6) divisible by 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(plan_tensor_parallel(demo, 0), Error);
  try {
    plan_tensor_parallel(io::load_model_config(hf("qwen3_moe")), 2);
    FAIL() << "MoE accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mixture-of-experts"), std::string::npos) << e.what();
  }
}

TEST(ShardedSource, HandsEachRankItsSlice) {
  const io::ModelConfig c = io::load_model_config(hf("qwen2"));  // q/k/v biases
  const ShardPlan plan = plan_tensor_parallel(c, 2);
  auto full = open_weight_source(hf("qwen2"), c);
  for (int rank = 0; rank < 2; ++rank) {
    ShardedSource shard(full, plan, rank);
    const std::string q = "model.layers.0.self_attn.q_proj.weight", o = "model.layers.0.self_attn.o_proj.weight";
    const std::string qb = "model.layers.0.self_attn.q_proj.bias";
    for (const std::string& name : {q, o, qb}) {
      const HostTensor whole = full->load(name), part = shard.load(name);
      const Weight &W = whole.weight, &P = part.weight;
      const size_t es = dtype_size(W.dtype);
      const bool cols = plan.kind_of(name) == ShardKind::Cols || whole.shape.size() == 1;
      EXPECT_EQ(shard.info(name).shape, part.shape) << name;
      if (cols) {
        ASSERT_EQ(P.cols * 2, W.cols) << name;
        ASSERT_EQ(P.rows, W.rows) << name;
      } else {
        ASSERT_EQ(P.rows * 2, W.rows) << name;
        ASSERT_EQ(P.cols, W.cols) << name;
      }
      for (int64_t r = 0; r < P.rows; ++r) {
        const int64_t wr = cols ? r : r + rank * P.rows, wc = cols ? rank * P.cols : 0;
        EXPECT_EQ(0, std::memcmp(static_cast<const uint8_t*>(P.data) + static_cast<size_t>(r * P.cols) * es,
                                 static_cast<const uint8_t*>(W.data) + static_cast<size_t>(wr * W.cols + wc) * es,
                                 static_cast<size_t>(P.cols) * es))
            << name << " rank " << rank << " row " << r;
      }
    }
  }
}

TEST(HostCollective, SumsInRankOrderOnEveryRank) {
  kernels::HostCollective group(3);
  std::vector<std::vector<float>> x = {{1.f, 1e8f}, {2.f, 1.f}, {3.f, -1e8f}};
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] { for (int i = 0; i < 50; ++i) { auto y = x[r]; group.all_reduce_sum(r, y.data(), 2);
                                   if (i == 49) x[r] = y; } });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(x[r][0], 6.f);
    EXPECT_EQ(x[r][1], (1e8f + 1.f) + -1e8f);  // rank order, not a tree or a different order
  }
  group.abort();
  float y = 0;
  EXPECT_THROW(group.all_reduce_sum(0, &y, 1), Error);
}

// Prefill two sequences, then greedy decode steps; returns every step's logits.
std::vector<std::vector<float>> run(Model& model, int steps) {
  kv::KvCache kv(model.backend(), model.kv_layout(32));
  const int32_t v = static_cast<int32_t>(model.config().vocab_size);
  std::vector<std::vector<int32_t>> prompts = {{12, 400, 77, 1801, 9, 3, 250, 1024, 5, 6, 7, 8, 13},
                                               {900, 31, 2, 4000, 17}};
  for (auto& p : prompts)
    for (int32_t& t : p) t %= v;
  std::vector<kv::SeqId> seqs;
  std::vector<int32_t> next, length;
  std::vector<std::vector<float>> all;
  Batch batch;
  for (const auto& p : prompts) {
    seqs.push_back(kv.add_sequence());
    EXPECT_TRUE(kv.reserve(seqs.back(), static_cast<int32_t>(p.size())));
    batch.add(seqs.back(), p, 0, LogitRows::Last);
    length.push_back(static_cast<int32_t>(p.size()));
  }
  for (int step = 0; step <= steps; ++step) {
    StepOutput out = model.forward(batch, kv);
    all.push_back(out.logits);
    batch.clear();
    for (size_t s = 0; s < seqs.size(); ++s) {
      const auto row = out.logits_row(s);
      const int32_t token = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
      EXPECT_TRUE(kv.reserve(seqs[s], length[s] + 1));
      batch.add(seqs[s], std::vector<int32_t>{token}, length[s], LogitRows::Last);
      ++length[s];
    }
  }
  return all;
}

// `bound`: max |Δlogit| / max |logit|. Greedy tokens must agree wherever the reference's best
// logit leads the runner-up by more than the bound allows to move.
void expect_sharded_matches_whole(const std::string& dir, int world, const std::string& device = "cpu",
                                  float bound = 1e-4f) {
  auto single_backend = kernels::make_backend(device);
  auto whole = load_model(dir, *single_backend);
  std::vector<std::unique_ptr<kernels::Backend>> devices;
  for (int r = 0; r < world; ++r) devices.push_back(kernels::make_backend(device));
  auto sharded = load_tensor_parallel_model(dir, std::move(devices), {});
  EXPECT_EQ(sharded->config().num_attention_heads, whole->config().num_attention_heads);
  EXPECT_EQ(sharded->kv_layout(8).num_kv_heads * world, whole->kv_layout(8).num_kv_heads);
  const auto ref = run(*whole, 6), got = run(*sharded, 6);
  ASSERT_EQ(ref.size(), got.size());
  for (size_t step = 0; step < ref.size(); ++step) {
    ASSERT_EQ(ref[step].size(), got[step].size());
    float max_ref = 0, max_diff = 0;
    for (size_t i = 0; i < ref[step].size(); ++i) {
      max_ref = std::max(max_ref, std::fabs(ref[step][i]));
      max_diff = std::max(max_diff, std::fabs(ref[step][i] - got[step][i]));
    }
    EXPECT_LE(max_diff, bound * max_ref) << dir << " step " << step;
    const size_t vocab = ref[step].size() / 2;
    for (size_t s = 0; s < 2; ++s) {
      std::vector<float> row(ref[step].begin() + static_cast<long>(s * vocab),
                             ref[step].begin() + static_cast<long>((s + 1) * vocab));
      const auto best = std::max_element(row.begin(), row.end()) - row.begin();
      std::vector<float> sorted = row;
      std::nth_element(sorted.begin(), sorted.begin() + 1, sorted.end(), std::greater<float>());
      const bool clear_lead = sorted[0] - sorted[1] > 2 * bound * max_ref;
      const auto got_best = std::max_element(got[step].begin() + static_cast<long>(s * vocab),
                                             got[step].begin() + static_cast<long>((s + 1) * vocab)) -
                            (got[step].begin() + static_cast<long>(s * vocab));
      if (clear_lead) {
        EXPECT_EQ(best, got_best) << dir << " step " << step << " seq " << s;
      }
    }
  }
}

TEST(TensorParallel, TwoCpuRanksMatchTheWholeDemoModel) { expect_sharded_matches_whole(kDemo, 2); }
TEST(TensorParallel, TwoCpuRanksMatchTheWholeQwen2WithBiases) { expect_sharded_matches_whole(hf("qwen2"), 2); }
TEST(TensorParallel, TwoCpuRanksMatchTheWholeLlama) { expect_sharded_matches_whole(hf("llama"), 2); }

// Two CUDA backends on one GPU (their partial sums meet through the host): the sharded CUDA
// forward against the whole model on the same GPU, within the bf16 operand bound of the CUDA
// golden tests. Several GPUs run the same code with one rank per device.
TEST(TensorParallel, TwoCudaRanksOnOneGpuMatchTheWholeModel) {
  if (kernels::default_device() != "cuda") {
    GTEST_SKIP() << "no CUDA device visible";
  }
  expect_sharded_matches_whole(kDemo, 2, "cuda:0", 2e-2f);
  expect_sharded_matches_whole(hf("qwen2"), 2, "cuda:0", 2e-2f);
}

}  // namespace
}  // namespace tachyon::model
