// Embeddings of the tiny Qwen3-Embedding-shaped fixture (tests/fixtures/embedding/qwen3_embedding,
// made by tools/make_embedding_fixture.py) against transformers' last_hidden_state pooled by the
// last token and by the mean, L2-normalized (golden.json).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "base/json.h"
#include "engine/embedder.h"
#include "io/embedding_config.h"
#include "kernels/backend.h"
#include "model/model.h"

namespace tachyon::engine {
namespace {

const std::string kFixture = std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/embedding/qwen3_embedding";

// ‖a − b‖ / ‖b‖
double relative_error(const std::vector<float>& a, const Json& golden) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double g = golden[i].get<double>();
    diff += (a[i] - g) * (a[i] - g);
    ref += g * g;
  }
  return std::sqrt(diff / ref);
}

class EmbedderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = kernels::make_backend("cpu");
    model_ = model::load_model(kFixture, *backend_);
    golden_ = parse_json(read_file(kFixture + "/golden.json"), "golden.json");
  }
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<model::Model> model_;
  Json golden_;
};

TEST_F(EmbedderTest, ReadsLastTokenPoolingAndNormalizeFromModulesJson) {
  const auto config = io::load_embedding_config(kFixture);
  ASSERT_TRUE(config);
  EXPECT_EQ(config->pooling, io::Pooling::LastToken);
  EXPECT_TRUE(config->normalize);
  EXPECT_FALSE(io::load_embedding_config(std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo"));
}

TEST_F(EmbedderTest, LastTokenAndMeanPoolingMatchTransformers) {
  Embedder last(*model_, {io::Pooling::LastToken, true}, 512);
  Embedder mean(*model_, {io::Pooling::Mean, true}, 512);
  const Json& inputs = golden_["inputs"];
  ASSERT_GE(inputs.size(), 3u);
  double worst = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int32_t> ids = inputs[i].get<std::vector<int32_t>>();
    const std::vector<float> a = last.embed(ids), b = mean.embed(ids);
    ASSERT_EQ(a.size(), 64u);
    const double err_last = relative_error(a, golden_["last_token"][i]), err_mean = relative_error(b, golden_["mean"][i]);
    worst = std::max({worst, err_last, err_mean});
    // The same bf16 weights on both sides, activations in f32: measured 5e-7 (2-core Sapphire Rapids).
    EXPECT_LT(err_last, 1e-4) << "input " << i;
    EXPECT_LT(err_mean, 1e-4) << "input " << i;
    double norm = 0;
    for (float x : a) norm += static_cast<double>(x) * x;
    EXPECT_NEAR(norm, 1.0, 1e-5);
  }
  std::printf("largest relative error against transformers: %.2e\n", worst);
}

TEST_F(EmbedderTest, ChunkedInputsGiveTheSameVector) {
  const std::vector<int32_t> ids = golden_["inputs"].back().get<std::vector<int32_t>>();
  ASSERT_GT(ids.size(), 14u);
  for (io::Pooling pooling : {io::Pooling::LastToken, io::Pooling::Mean, io::Pooling::Cls}) {
    Embedder whole(*model_, {pooling, true}, 512), chunked(*model_, {pooling, true}, 512, /*tokens_per_step=*/7);
    const std::vector<float> a = whole.embed(ids), b = chunked.embed(ids);
    for (size_t d = 0; d < a.size(); ++d) EXPECT_NEAR(a[d], b[d], 1e-5) << io::pooling_name(pooling) << " " << d;
  }
}

TEST_F(EmbedderTest, RefusesEmptyTooLongAndOutOfVocabularyInputs) {
  Embedder e(*model_, {io::Pooling::LastToken, true}, 8);
  EXPECT_THROW(e.embed(std::vector<int32_t>{}), tachyon::Error);
  EXPECT_THROW(e.embed(std::vector<int32_t>(9, 1)), tachyon::Error);
  EXPECT_THROW(e.embed(std::vector<int32_t>{1, 8192}), tachyon::Error);
}

}  // namespace
}  // namespace tachyon::engine
