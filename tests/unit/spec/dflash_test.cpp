// DFlash block drafters (model/dflash_head.h, spec/dflash.h): the published z-lab layout, the
// target's named-layer hidden states from its one forward, fail-closed loading, and a context fed
// in pieces drafting exactly what the same context fed at once drafts.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "base/error.h"
#include "base/json.h"
#include "io/config.h"
#include "kernels/backend.h"
#include "kv/kv_cache.h"
#include "model/dflash_head.h"
#include "model/model.h"
#include "spec/dflash.h"

namespace tachyon::spec {
namespace {

namespace fs = std::filesystem;
const std::string kDemo = std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo";
// The target layers models/tachyon-demo/dflash/config.json names (dflash_config.target_layer_ids).
const std::vector<int32_t> kDemoDrafterLayers = {1, 3, 4};
const std::vector<int32_t> kPrompt = {785, 4213, 29, 1018, 11, 3051, 9, 264, 30, 77, 1203, 5, 900, 42, 6, 318, 12};

// A Qwen3-32B-class DFlash drafter (tests/fixtures/dflash): the config is the one SpecForge
// publishes (configs/qwen3-32b-dflash.json); the weight index was written from the names z-lab's
// DFlashDraftModel saves (fc, hidden_norm, norm, layers.N.*; no embedding, no LM head), as the
// reference code and loaders for those checkpoints spell them: no stored copy of a real index
// file was found. The loader requires exactly these names.
TEST(DFlashLayout, PublishedIndexHoldsExactlyTheTensorsTheLoaderBinds) {
  const std::string dir = std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/dflash/";
  const Json config = parse_json(read_file(dir + "qwen3-32b-dflash.config.json"), "config");
  const Json index = parse_json(read_file(dir + "qwen3-32b-dflash.model.safetensors.index.json"), "index");
  std::vector<std::string> names;
  for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) names.push_back(it.key());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, model::dflash_tensor_names(config["num_hidden_layers"].get<int64_t>()));
  // The embedding and LM head are the target's: not in the drafter.
  EXPECT_EQ(index["weight_map"].count("model.embed_tokens.weight"), 0u);
  EXPECT_EQ(index["weight_map"].count("lm_head.weight"), 0u);
  EXPECT_EQ(config["dflash_config"]["target_layer_ids"].size(), 10u);
  EXPECT_LT(config["dflash_config"]["target_layer_ids"].back().get<int64_t>(),
            config["num_target_layers"].get<int64_t>() - 1);
}

// The target's hidden states of named layers come from the same forward: the last layer named
// alone is the default hidden state, the order of the names orders the concatenation, and the
// logits do not change.
TEST(DFlashTarget, NamedLayersComeFromTheSameForward) {
  auto backend = kernels::make_backend("cpu");
  auto target = model::load_model(kDemo, *backend);
  const int64_t h = target->config().hidden_size;
  auto run = [&](std::vector<int32_t> layers) {
    kv::KvCache kv(*backend, target->kv_layout(16));
    const auto seq = kv.add_sequence();
    EXPECT_TRUE(kv.reserve(seq, static_cast<int32_t>(kPrompt.size())));
    model::Batch batch;
    batch.add(seq, kPrompt, 0, model::LogitRows::All, /*want_hidden=*/true);
    batch.hidden_layers = std::move(layers);
    return target->forward(batch, kv);
  };
  const auto plain = run({}), last = run({5}), pair = run({1, 3}), swapped = run({3, 1});
  EXPECT_EQ(plain.hidden, last.hidden);
  EXPECT_EQ(plain.logits, pair.logits);
  ASSERT_EQ(pair.hidden_size, 2 * h);
  ASSERT_EQ(pair.hidden.size(), kPrompt.size() * 2 * h);
  for (size_t r = 0; r < kPrompt.size(); ++r) {
    const float* a = pair.hidden.data() + r * 2 * h;
    const float* b = swapped.hidden.data() + r * 2 * h;
    EXPECT_TRUE(std::equal(a, a + h, b + h) && std::equal(a + h, a + 2 * h, b)) << "row " << r;
    EXPECT_FALSE(std::equal(a, a + h, plain.hidden.data() + r * h)) << "layer 1 is not the last layer";
  }
}

// A drafter folder for the demo target with one config field changed.
fs::path drafter_with(const std::string& key, const Json& value) {
  const fs::path dir = fs::temp_directory_path() / ("tachyon-dflash-" + std::to_string(::getpid()) + "-" + key);
  fs::create_directories(dir);
  Json config = parse_json(read_file(kDemo + "/dflash/config.json"), "config");
  if (key == "target_layer_ids") config["dflash_config"][key] = value;
  else config[key] = value;
  std::ofstream(dir / "config.json") << config.dump();
  if (!fs::exists(dir / "model.safetensors")) fs::create_symlink(fs::path(kDemo) / "dflash/model.safetensors", dir / "model.safetensors");
  return dir;
}

void expect_refused(const std::string& dir, const io::ModelConfig& target, const std::string& words) {
  auto backend = kernels::make_backend("cpu");
  try {
    model::DFlashHead::load(dir, kDemo, target, *backend);
    FAIL() << "loaded a DFlash drafter that does not fit: expected '" << words << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(DFlashHead, FailsClosedOnAMismatchedTarget) {
  const io::ModelConfig demo = io::load_model_config(kDemo);
  auto backend = kernels::make_backend("cpu");
  const auto head = model::DFlashHead::load(kDemo + "/dflash", kDemo, demo, *backend);
  EXPECT_EQ(head->block_size(), 8);
  EXPECT_EQ(head->mask_token(), 8191);
  EXPECT_EQ(head->target_layer_ids(), kDemoDrafterLayers);
  EXPECT_EQ(head->feature_size(), static_cast<int64_t>(kDemoDrafterLayers.size()) * demo.hidden_size);

  io::ModelConfig wider = demo;
  wider.hidden_size = 512;
  expect_refused(kDemo + "/dflash", wider, "hidden_size 384 differs from the target's 512");
  io::ModelConfig other_vocab = demo;
  other_vocab.vocab_size = 32000;
  expect_refused(kDemo + "/dflash", other_vocab, "vocab_size 8192 differs from the target's 32000");
  io::ModelConfig shallow = demo;
  shallow.num_hidden_layers = 3;
  expect_refused(kDemo + "/dflash", shallow, "num_target_layers 6 but the target has 3 layers");
  expect_refused(drafter_with("target_layer_ids", Json::array({1, 5})).string(), demo,
                 "target layer id 5 is out of range");
  expect_refused(drafter_with("target_layer_ids", Json::array({-1, 3})).string(), demo,
                 "target layer id -1 is out of range");
  // fc's width must be one hidden size per target layer.
  expect_refused(drafter_with("target_layer_ids", Json::array({1})).string(), demo, "fc.weight");
  expect_refused(drafter_with("block_size", 1).string(), demo, "block_size 1 is not in [2, 64]");
  for (const char* key : {"target_layer_ids", "block_size"})
    fs::remove_all(fs::temp_directory_path() / ("tachyon-dflash-" + std::to_string(::getpid()) + "-" + key));
}

// The target's features of `tokens` at the demo drafter's layers: [positions, 3·hidden].
std::vector<float> features(model::Model& target, kernels::Backend& backend, const std::vector<int32_t>& tokens) {
  kv::KvCache kv(backend, target.kv_layout(16));
  const auto seq = kv.add_sequence();
  EXPECT_TRUE(kv.reserve(seq, static_cast<int32_t>(tokens.size())));
  model::Batch batch;
  batch.add(seq, tokens, 0, model::LogitRows::Last, /*want_hidden=*/true);
  batch.hidden_layers = kDemoDrafterLayers;
  return target.forward(batch, kv).hidden;
}

TEST(DFlashDrafter, AContextFedInPiecesDraftsWhatItDraftsFedAtOnce) {
  auto backend = kernels::make_backend("cpu");
  auto target = model::load_model(kDemo, *backend);
  auto load = [&] { return make_dflash_drafter(model::DFlashHead::load(kDemo + "/dflash", kDemo, target->config(), *backend), *backend); };
  auto once = load(), pieces = load();
  EXPECT_EQ(once->hidden_layers(), kDemoDrafterLayers);
  const std::vector<float> f = features(*target, *backend, kPrompt);
  const size_t width = f.size() / kPrompt.size();
  const int32_t n = static_cast<int32_t>(kPrompt.size()) - 1;  // the anchor: the last token
  once->observe_hidden(1, 0, {f.data(), n * width}, n);
  const auto want = once->propose(1, kPrompt, 7);
  ASSERT_EQ(want.size(), 7u);
  // In pieces: a draft after the first 9 tokens, then the rest of the context.
  const int32_t m = 8;
  pieces->observe_hidden(1, 0, {f.data(), m * width}, m);
  EXPECT_EQ(pieces->propose(1, std::span<const int32_t>(kPrompt).first(m + 1), 7).size(), 7u);
  pieces->observe_hidden(1, m, {f.data() + m * width, (n - m) * width}, n - m);
  EXPECT_EQ(pieces->propose(1, kPrompt, 7), want);
  // A chain of fewer tokens is its prefix; the tree of 7 nodes holds the chain's first token.
  pieces->observe_hidden(1, n, {}, 0);
  const DraftTree tree = pieces->propose_tree(1, kPrompt, 7, 7);
  ASSERT_FALSE(tree.tokens.empty());
  EXPECT_EQ(tree.tokens[0], want[0]);
  // Hidden states of the wrong width (a target that ignored hidden_layers) are refused.
  EXPECT_THROW(pieces->observe_hidden(2, 0, {f.data(), width / 2}, 1), Error);
}

// The drafter's forward against an independent numpy reference (tools/dflash_reference.py,
// tests/fixtures/dflash/code_completion_chains.json): the code-completion prompt of bench/spec plus
// the target's first greedy token as the anchor, drafted over the whole vocabulary (the default);
// positions within 0.01 of a tie aside.
TEST(DFlashDrafter, DraftsWhatTheReferenceDrafts) {
  auto backend = kernels::make_backend("cpu");
  auto target = model::load_model(kDemo, *backend);
  auto drafter = make_dflash_drafter(model::DFlashHead::load(kDemo + "/dflash", kDemo, target->config(), *backend),
                                     *backend);
  const std::string path = std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/dflash/code_completion_chains.json";
  const Json golden = parse_json(read_file(path), path);
  const auto sequence = golden.at("sequence").get<std::vector<int32_t>>();
  const int32_t n = golden.at("first_anchor").get<int32_t>();  // the anchor: the first generated token
  const std::vector<int32_t> tokens(sequence.begin(), sequence.begin() + n + 1);
  const auto want = golden.at("drafts").at(0).get<std::vector<int32_t>>();
  const auto gaps = golden.at("top2_gaps").at(0).get<std::vector<double>>();
  const std::vector<float> f = features(*target, *backend, tokens);
  drafter->observe_hidden(1, 0, {f.data(), f.size() / tokens.size() * n}, n);
  const auto got = drafter->propose(1, tokens, 7);
  ASSERT_EQ(got.size(), want.size());
  for (size_t j = 0; j < got.size(); ++j) {
    if (gaps[j] < 1e-2) continue;
    EXPECT_EQ(got[j], want[j]) << "block position " << j + 1;
  }
}

}  // namespace
}  // namespace tachyon::spec
