// Fail-closed loading of MoE / MLA / hybrid checkpoints: a checkpoint that lacks one expert
// (or one of the arch-specific tensors) refuses to load, naming the tensor.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "base/error.h"
#include "base/json.h"
#include "io/safetensors.h"
#include "kernels/backend.h"
#include "model/model.h"

namespace tachyon::model {
namespace {

namespace fs = std::filesystem;

// A copy of tests/fixtures/hf/<arch> whose model.safetensors is rewritten by `edit`.
class EditedFixture {
 public:
  // edit_config: changes to config.json (none by default).
  EditedFixture(const std::string& arch, const std::function<void(std::vector<io::TensorToWrite>&)>& edit,
                const std::function<void(Json&)>& edit_config = nullptr)
      : dir_(fs::temp_directory_path() / ("tachyon-moe-" + arch + "-" + std::to_string(::getpid()))) {
    const fs::path src = fs::path(TACHYON_SOURCE_DIR) / "tests/fixtures/hf" / arch;
    fs::create_directories(dir_);
    Json config = parse_json(read_file((src / "config.json").string()), "config.json");
    if (edit_config) edit_config(config);
    std::ofstream((dir_ / "config.json").string()) << config.dump();
    const auto ckpt = io::Checkpoint::open_file((src / "model.safetensors").string());
    std::vector<io::TensorToWrite> tensors;
    for (const auto& [name, t] : ckpt.tensors()) tensors.push_back({name, t.dtype, t.shape, t.data});
    edit(tensors);
    io::write_safetensors((dir_ / "model.safetensors").string(), tensors);
  }
  ~EditedFixture() { fs::remove_all(dir_); }

  std::string load_error() const {
    auto backend = kernels::make_backend("cpu");
    try {
      load_model(dir_.string(), *backend);
    } catch (const Error& e) {
      return e.what();
    }
    return "(loaded)";
  }

 private:
  fs::path dir_;
};

void drop(std::vector<io::TensorToWrite>& t, const std::string& name) {
  const size_t before = t.size();
  std::erase_if(t, [&](const auto& x) { return x.name == name; });
  ASSERT_EQ(t.size() + 1, before) << name << " is not in the fixture";
}

TEST(MoeFailClosed, Qwen3MoeMissingOneExpertIsNamed) {
  EditedFixture f("qwen3_moe", [](auto& t) { drop(t, "model.layers.1.mlp.experts.5.up_proj.weight"); });
  const std::string msg = f.load_error();
  EXPECT_NE(msg.find("'model.layers.1.mlp.experts.5.up_proj.weight' is missing"), std::string::npos) << msg;
}

TEST(MoeFailClosed, DeepseekMissingExpertAndCorrectionBiasAreNamed) {
  EditedFixture f("deepseek_v3", [](auto& t) {
    drop(t, "model.layers.2.mlp.experts.15.down_proj.weight");
    drop(t, "model.layers.1.mlp.gate.e_score_correction_bias");
  });
  const std::string msg = f.load_error();
  EXPECT_NE(msg.find("'model.layers.2.mlp.experts.15.down_proj.weight' is missing"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'model.layers.1.mlp.gate.e_score_correction_bias' is missing"), std::string::npos) << msg;
}

TEST(MoeFailClosed, GptOssFusedExpertsWithOneExpertTooFewAreNamed) {
  EditedFixture f("gpt_oss", [](auto& t) {
    for (auto& x : t)
      if (x.name == "model.layers.3.mlp.experts.down_proj") x.shape[0] -= 1;  // 7 experts' worth of bytes
  });
  const std::string msg = f.load_error();
  EXPECT_NE(msg.find("'model.layers.3.mlp.experts.down_proj'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has shape [7, 40, 64]"), std::string::npos) << msg;
  // All 8 experts are cut from that one tensor; it is named once.
  const std::string name = "'model.layers.3.mlp.experts.down_proj'";
  EXPECT_EQ(msg.find(name), msg.rfind(name)) << msg;
}

TEST(MoeFailClosed, Qwen3NextMissingSharedExpertGateAndConvAreNamed) {
  EditedFixture f("qwen3_next", [](auto& t) {
    drop(t, "model.layers.2.mlp.shared_expert_gate.weight");
    drop(t, "model.layers.0.linear_attn.conv1d.weight");
  });
  const std::string msg = f.load_error();
  EXPECT_NE(msg.find("'model.layers.2.mlp.shared_expert_gate.weight' is missing"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'model.layers.0.linear_attn.conv1d.weight' is missing"), std::string::npos) << msg;
}

// The expert lists are sized by the config's count before any tensor is checked: a crafted
// count (10^12) is refused, naming it, instead of exhausting memory; so is a top-k beyond it.
TEST(MoeFailClosed, AnExpertCountNoModelHasIsRefusedBeforeAnythingIsSizedByIt) {
  EditedFixture huge("qwen3_moe", [](auto&) {}, [](Json& c) { c["num_experts"] = int64_t{1000000000000}; });
  std::string msg = huge.load_error();
  EXPECT_NE(msg.find("the config's expert count 1000000000000 is outside 1..4096"), std::string::npos) << msg;
  EditedFixture top_k("qwen3_moe", [](auto&) {}, [](Json& c) { c["num_experts_per_tok"] = 100000; });
  msg = top_k.load_error();
  EXPECT_NE(msg.find("num_experts_per_tok 100000 is outside 1.."), std::string::npos) << msg;
}

TEST(MoeFailClosed, IntactFixtureLoads) {
  EditedFixture f("qwen3_moe", [](auto&) {});
  EXPECT_EQ(f.load_error(), "(loaded)");
}

}  // namespace
}  // namespace tachyon::model
