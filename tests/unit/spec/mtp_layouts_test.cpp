// The DeepSeek-V3 MTP layout (layer `num_hidden_layers`: enorm, hnorm, eh_proj, shared_head,
// config num_nextn_predict_layers). (1) The demo's Qwen-layout head, re-saved under DeepSeek
// names, computes bit for bit the same logits (and so matches the demo's golden MTP logits);
// a missing DeepSeek tensor is named. (2) On the tiny DeepSeek-V3 fixture (MLA + MoE) with an
// MTP layer added, MTP speculation keeps greedy outputs identical.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "base/error.h"
#include "base/json.h"
#include "engine/engine.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "model/mtp_head.h"
#include "spec/mtp.h"

namespace tachyon {
namespace {

namespace fs = std::filesystem;
const fs::path kRoot = TACHYON_SOURCE_DIR;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("tachyon-mtp-layout-" + std::to_string(::getpid()) + "-" +
                                               std::to_string(std::random_device{}()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

// Writes `source`'s tensors renamed by `rename` ("" drops one) plus `extra`, and its config
// edited by `edit_config`, into `out`.
void rewrite_checkpoint(const fs::path& source, const fs::path& out,
                        const std::function<std::string(const std::string&)>& rename,
                        const std::vector<io::TensorToWrite>& extra, const std::function<void(Json&)>& edit_config) {
  const auto ckpt = io::Checkpoint::open(source.string());
  std::vector<io::TensorToWrite> tensors;
  for (const auto& [name, t] : ckpt.tensors()) {
    const std::string to = rename(name);
    if (!to.empty()) tensors.push_back({to, t.dtype, t.shape, t.data});
  }
  tensors.insert(tensors.end(), extra.begin(), extra.end());
  io::write_safetensors((out / "model.safetensors").string(), tensors);
  Json config = parse_json(read_file((source / "config.json").string()), "config.json");
  edit_config(config);
  std::ofstream(out / "config.json") << config.dump(2);
}

std::string deepseek_name(const std::string& qwen_name, int layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  if (qwen_name == "mtp.pre_fc_norm_embedding.weight") return p + "enorm.weight";
  if (qwen_name == "mtp.pre_fc_norm_hidden.weight") return p + "hnorm.weight";
  if (qwen_name == "mtp.fc.weight") return p + "eh_proj.weight";
  if (qwen_name == "mtp.norm.weight") return p + "shared_head.norm.weight";
  if (qwen_name.rfind("mtp.layers.0.", 0) == 0) return p + qwen_name.substr(13);
  return qwen_name;
}

// The recursive drafting step reads o_t where it stayed on the device: the same bits as a
// forward fed the o_t it returned to the host; a step whose rows do not match is refused.
TEST(MtpLayouts, RecursiveStepEqualsForwardWithTheReturnedHidden) {
  const fs::path demo = kRoot / "models/tachyon-demo";
  auto backend = kernels::make_backend("cpu");
  auto head = model::MtpHead::load(demo.string(), io::load_model_config(demo.string()), *backend);
  ASSERT_NE(head, nullptr);
  const auto golden = io::Checkpoint::open_file((demo / "golden.safetensors").string());
  const auto& ids = golden.get("code.mtp_input_ids");
  std::vector<int32_t> next(static_cast<const int64_t*>(ids.data),
                            static_cast<const int64_t*>(ids.data) + ids.num_elements());
  const auto& h = golden.get("code.hidden_prenorm");
  const std::vector<float> hidden(static_cast<const float*>(h.data),
                                  static_cast<const float*>(h.data) + h.num_elements());
  kv::KvCache kv(*backend, head->kv_layout(16));
  const int32_t t = static_cast<int32_t>(next.size());
  std::vector<float> level2[2];
  for (int recursive = 0; recursive < 2; ++recursive) {
    auto seq = kv.add_sequence();
    kv.reserve(seq, t + 1);
    model::Batch batch;
    batch.add(seq, next, 0, model::LogitRows::Last);
    const auto first = head->forward(batch, hidden, kv);
    const int32_t draft = 17;
    batch.clear();
    batch.add(seq, std::span<const int32_t>(&draft, 1), t, model::LogitRows::Last);
    level2[recursive] = recursive ? head->forward_recursive(batch, kv).logits : head->forward(batch, first.hidden, kv).logits;
  }
  ASSERT_FALSE(level2[0].empty());
  ASSERT_EQ(level2[0].size(), level2[1].size());
  EXPECT_EQ(0, std::memcmp(level2[0].data(), level2[1].data(), level2[0].size() * sizeof(float)));
  // Two rows after a step with one output: refused.
  auto seq = kv.add_sequence();
  kv.reserve(seq, 2);
  model::Batch two;
  two.add(seq, std::vector<int32_t>{3, 4}, 0, model::LogitRows::Last);
  EXPECT_THROW(head->forward_recursive(two, kv), Error);
}

TEST(MtpLayouts, DeepSeekNamesGiveTheSameHeadAsQwenNames) {
  const fs::path demo = kRoot / "models/tachyon-demo";
  TempDir dir;
  const auto demo_ckpt = io::Checkpoint::open(demo.string());
  const auto& embed = demo_ckpt.get("model.embed_tokens.weight");
  rewrite_checkpoint(
      demo, dir.path, [](const std::string& n) { return deepseek_name(n, 6); },
      {{"model.layers.6.shared_head.head.weight", embed.dtype, embed.shape, embed.data}}, [](Json& c) {
        c.erase("mtp_num_hidden_layers");
        c["num_nextn_predict_layers"] = 1;
      });
  auto backend = kernels::make_backend("cpu");
  auto qwen = model::MtpHead::load(demo.string(), io::load_model_config(demo.string()), *backend);
  auto deepseek = model::MtpHead::load(dir.path.string(), io::load_model_config(dir.path.string()), *backend);
  ASSERT_NE(deepseek, nullptr);
  EXPECT_EQ(deepseek->num_tensors(), qwen->num_tensors() + 1);  // + shared_head.head
  // The target model itself loads from the same files (layer 6 is not one of its layers).
  EXPECT_NO_THROW(model::load_model(dir.path.string(), *backend));
  const auto golden = io::Checkpoint::open_file((demo / "golden.safetensors").string());
  const auto& ids = golden.get("code.mtp_input_ids");
  std::vector<int32_t> next(static_cast<const int64_t*>(ids.data),
                            static_cast<const int64_t*>(ids.data) + ids.num_elements());
  const auto& h = golden.get("code.hidden_prenorm");
  std::vector<float> hidden(static_cast<const float*>(h.data), static_cast<const float*>(h.data) + h.num_elements());
  std::vector<float> logits[2];
  int i = 0;
  for (model::MtpHead* head : {qwen.get(), deepseek.get()}) {
    kv::KvCache kv(*backend, head->kv_layout(16));
    auto seq = kv.add_sequence();
    kv.reserve(seq, static_cast<int32_t>(next.size()));
    model::Batch batch;
    batch.add(seq, next, 0, model::LogitRows::All);
    logits[i++] = head->forward(batch, hidden, kv).logits;
  }
  ASSERT_EQ(logits[0].size(), logits[1].size());
  EXPECT_EQ(0, std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)));

  // A draft vocabulary of the first n ids gives exactly those columns of the full logits.
  const int64_t n = 1000, vocab = qwen->vocab_size();
  qwen->set_draft_vocabulary(n);
  kv::KvCache kv(*backend, qwen->kv_layout(16));
  auto seq = kv.add_sequence();
  kv.reserve(seq, static_cast<int32_t>(next.size()));
  model::Batch batch;
  batch.add(seq, next, 0, model::LogitRows::All);
  const auto trimmed = qwen->forward(batch, hidden, kv).logits;
  ASSERT_EQ(trimmed.size(), next.size() * static_cast<size_t>(n));
  for (size_t r = 0; r < next.size(); ++r)
    EXPECT_EQ(0, std::memcmp(trimmed.data() + r * n, logits[0].data() + r * vocab, n * sizeof(float))) << "row " << r;

  // Fail closed: the config declares the head, one of its tensors is gone.
  TempDir broken;
  rewrite_checkpoint(
      demo, broken.path,
      [](const std::string& n) { return n == "mtp.pre_fc_norm_hidden.weight" ? std::string() : deepseek_name(n, 6); },
      {}, [](Json& c) {
        c.erase("mtp_num_hidden_layers");
        c["num_nextn_predict_layers"] = 1;
      });
  try {
    model::MtpHead::load(broken.path.string(), io::load_model_config(broken.path.string()), *backend);
    FAIL() << "loaded a DeepSeek MTP head without hnorm";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.6.hnorm.weight"), std::string::npos) << e.what();
  }
}

// The tiny DeepSeek-V3 fixture (MLA attention, MoE from layer 1) has no MTP tensors (transformers
// drops them); build layer 3 from layer 2's weights plus deterministic enorm/hnorm/eh_proj.
TEST(MtpLayouts, DeepSeekV3MtpSpeculationIsExact) {
  const fs::path fixture = kRoot / "tests/fixtures/hf/deepseek_v3";
  TempDir dir;
  const auto ckpt = io::Checkpoint::open(fixture.string());
  const auto config = io::load_model_config(fixture.string());
  const int64_t hidden = config.hidden_size;
  std::vector<io::TensorToWrite> extra;
  for (const auto& [name, t] : ckpt.tensors())
    if (name.rfind("model.layers.2.", 0) == 0)
      extra.push_back({"model.layers.3." + name.substr(15), t.dtype, t.shape, t.data});
  const auto& norm = ckpt.get("model.norm.weight");
  const auto& lm_head = ckpt.get("lm_head.weight");
  std::vector<uint16_t> eh(static_cast<size_t>(hidden * 2 * hidden));
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.f, 0.01f);
  for (int64_t r = 0; r < hidden; ++r)
    for (int64_t c = 0; c < 2 * hidden; ++c)  // ~ the hidden half's identity: some drafts agree
      eh[r * 2 * hidden + c] = f32_to_bf16((c == hidden + r ? 1.f : 0.f) + dist(rng));
  extra.push_back({"model.layers.3.enorm.weight", norm.dtype, norm.shape, norm.data});
  extra.push_back({"model.layers.3.hnorm.weight", norm.dtype, norm.shape, norm.data});
  extra.push_back({"model.layers.3.eh_proj.weight", DType::BF16, {hidden, 2 * hidden}, eh.data()});
  extra.push_back({"model.layers.3.shared_head.norm.weight", norm.dtype, norm.shape, norm.data});
  extra.push_back({"model.layers.3.shared_head.head.weight", lm_head.dtype, lm_head.shape, lm_head.data});
  rewrite_checkpoint(
      fixture, dir.path, [](const std::string& n) { return n; }, extra, [](Json&) {});

  auto backend = kernels::make_backend("cpu");
  auto target = model::load_model(dir.path.string(), *backend);
  auto head = model::MtpHead::load(dir.path.string(), target->config(), *backend);
  ASSERT_NE(head, nullptr);
  auto drafter = spec::make_mtp_drafter(std::move(head), *backend);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> p;
    for (int j = 0; j < 5 + 3 * i; ++j) p.push_back(static_cast<int32_t>((i * 97 + j * 31) % 500 + 2));
    prompts.push_back(p);
  }
  auto run = [&](spec::Drafter* d, engine::SpecUsage* usage) {
    engine::EngineConfig cfg{.max_concurrent = 4, .num_blocks = 128};
    cfg.drafter = d;
    cfg.gates = false;
    engine::Engine engine(*target, cfg);
    std::vector<std::shared_ptr<engine::RequestStream>> streams;
    for (const auto& p : prompts) {
      engine::GenerationRequest r;
      r.prompt = p;
      r.sampling.temperature = 0;
      r.max_tokens = 24;
      streams.push_back(engine.submit(r));
    }
    std::vector<std::vector<int32_t>> outs;
    for (auto& s : streams) {
      outs.emplace_back();
      for (;;) {
        auto o = s->next(std::chrono::seconds(60));
        if (!o) break;
        outs.back().insert(outs.back().end(), o->tokens.begin(), o->tokens.end());
        if (o->finish != engine::FinishReason::None) {
          if (usage) usage->num_drafted += o->spec.num_drafted, usage->num_accepted += o->spec.num_accepted;
          break;
        }
      }
    }
    return outs;
  };
  engine::SpecUsage usage;
  const auto plain = run(nullptr, nullptr);
  const auto speculative = run(drafter.get(), &usage);
  EXPECT_EQ(plain, speculative);
  EXPECT_GT(usage.num_accepted, 0) << "no draft accepted: the accept path is not exercised";
  EXPECT_LT(usage.num_accepted, usage.num_drafted) << "no draft rejected: rollback is not exercised";
  std::printf("deepseek_v3 MTP: %d drafted, %d accepted\n", usage.num_drafted, usage.num_accepted);
}

}  // namespace
}  // namespace tachyon
