// Fail-closed loading: every kind of broken checkpoint stops with a message naming it.
#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "io/config.h"
#include "kernels/backend.h"
#include "model/model.h"

namespace tachyon::io {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("tachyon-io-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++))) {
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

void write_bytes(const std::string& path, const std::string& header, size_t data_bytes, int64_t claimed_len = -1) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t len = claimed_len >= 0 ? static_cast<uint64_t>(claimed_len) : header.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << header;
  out << std::string(data_bytes, '\0');
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Safetensors, ReadsTensorsWrittenByWriter) {
  TempDir dir;
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<uint16_t> b = {f32_to_bf16(1.5f), f32_to_bf16(-2.f)};
  write_safetensors(dir.file("x.safetensors"), {{"a", DType::F32, {2, 3}, a.data()}, {"b", DType::BF16, {2}, b.data()}});
  auto ckpt = Checkpoint::open_file(dir.file("x.safetensors"));
  EXPECT_EQ(ckpt.get("a").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(static_cast<const float*>(ckpt.get("a").data)[5], 6.f);
  EXPECT_EQ(bf16_to_f32(static_cast<const uint16_t*>(ckpt.get("b").data)[1]), -2.f);
  EXPECT_NE(error_of([&] { ckpt.get("c"); }).find("'c' not found"), std::string::npos);
}

TEST(Safetensors, TruncatedFileIsRejected) {
  TempDir dir;
  write_bytes(dir.file("t.safetensors"), R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8);
  auto msg = error_of([&] { SafetensorsFile::open(dir.file("t.safetensors")); });
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST(Safetensors, OverlappingOffsetsAreRejected) {
  TempDir dir;
  write_bytes(dir.file("o.safetensors"),
              R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
              24);
  auto msg = error_of([&] { SafetensorsFile::open(dir.file("o.safetensors")); });
  EXPECT_NE(msg.find("overlap"), std::string::npos) << msg;
}

TEST(Safetensors, HeaderLargerThanFileIsRejected) {
  TempDir dir;
  write_bytes(dir.file("h.safetensors"), R"({})", 0, 1 << 20);
  auto msg = error_of([&] { SafetensorsFile::open(dir.file("h.safetensors")); });
  EXPECT_NE(msg.find("header claims"), std::string::npos) << msg;
}

TEST(Safetensors, NonJsonHeaderIsRejected) {
  TempDir dir;
  write_bytes(dir.file("j.safetensors"), "{not json", 0);
  EXPECT_NE(error_of([&] { SafetensorsFile::open(dir.file("j.safetensors")); }).find("not valid JSON"), std::string::npos);
}

// Found by fuzzing: nlohmann reports a number past a double's range as out_of_range, not parse_error.
TEST(Safetensors, HeaderNumberPastADoubleIsRejectedAsInvalidJson) {
  TempDir dir;
  write_bytes(dir.file("n.safetensors"), R"({"__metadata__": {"step": 1e400}})", 0);
  const std::string msg = error_of([&] { SafetensorsFile::open(dir.file("n.safetensors")); });
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
  EXPECT_NE(msg.find("number overflow"), std::string::npos) << msg;
}

TEST(Safetensors, ShapeThatDisagreesWithOffsetsIsRejected) {
  TempDir dir;
  write_bytes(dir.file("s.safetensors"), R"({"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,8]}})", 8);
  auto msg = error_of([&] { SafetensorsFile::open(dir.file("s.safetensors")); });
  EXPECT_NE(msg.find("needs 6 bytes"), std::string::npos) << msg;
}

TEST(Safetensors, ShardedIndexNamingAMissingShardIsRejected) {
  TempDir dir;
  std::ofstream(dir.file("model.safetensors.index.json")) << R"({"weight_map":{"w":"model-00002.safetensors"}})";
  auto msg = error_of([&] { Checkpoint::open(dir.path().string()); });
  EXPECT_NE(msg.find("model-00002.safetensors"), std::string::npos) << msg;
}

TEST(Safetensors, ShardedCheckpointLoads) {
  // The demo model is sharded in three files.
  auto ckpt = Checkpoint::open(std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo");
  EXPECT_EQ(ckpt.tensors().size(), 83u);
  EXPECT_EQ(ckpt.get("model.embed_tokens.weight").shape, (std::vector<int64_t>{8192, 384}));
}

// --- whole-model fail-closed checks, on copies of a real fixture -----------------------

class BrokenModel : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path src = fs::path(TACHYON_SOURCE_DIR) / "tests/fixtures/hf/qwen3";
    for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(src / f, dir_.path() / f);
    ckpt_ = std::make_unique<Checkpoint>(Checkpoint::open_file((src / "model.safetensors").string()));
  }
  // Rewrites model.safetensors with `edit` applied to the tensor list.
  void rewrite(const std::function<void(std::vector<TensorToWrite>&)>& edit) {
    std::vector<TensorToWrite> tensors;
    for (const auto& [name, t] : ckpt_->tensors()) tensors.push_back({name, t.dtype, t.shape, t.data});
    edit(tensors);
    write_safetensors(dir_.file("model.safetensors.new"), tensors);
    fs::rename(dir_.file("model.safetensors.new"), dir_.file("model.safetensors"));
  }
  std::string load_error() {
    auto backend = kernels::make_backend("cpu");
    return error_of([&] { model::load_model(dir_.path().string(), *backend); });
  }
  TempDir dir_;
  std::unique_ptr<Checkpoint> ckpt_;
};

TEST_F(BrokenModel, MissingTensorIsNamed) {
  rewrite([](auto& t) { std::erase_if(t, [](auto& x) { return x.name == "model.layers.1.self_attn.k_norm.weight"; }); });
  auto msg = load_error();
  EXPECT_NE(msg.find("'model.layers.1.self_attn.k_norm.weight' is missing"), std::string::npos) << msg;
}

TEST_F(BrokenModel, MisshapenTensorIsNamed) {
  rewrite([](auto& t) {
    for (auto& x : t)
      if (x.name == "model.layers.0.mlp.down_proj.weight") x.shape = {x.shape[1], x.shape[0]};
  });
  auto msg = load_error();
  EXPECT_NE(msg.find("'model.layers.0.mlp.down_proj.weight'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has shape"), std::string::npos) << msg;
}

TEST_F(BrokenModel, WrongDtypeIsNamed) {
  static std::vector<int32_t> ints(64);
  rewrite([](auto& t) {
    for (auto& x : t)
      if (x.name == "model.norm.weight") {
        x.dtype = DType::I32;
        x.data = ints.data();
      }
  });
  auto msg = load_error();
  EXPECT_NE(msg.find("'model.norm.weight'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dtype I32"), std::string::npos) << msg;
}

TEST_F(BrokenModel, TruncatedWeightsFileIsNamed) {
  fs::resize_file(dir_.file("model.safetensors"), fs::file_size(dir_.file("model.safetensors")) - 100);
  auto msg = load_error();
  EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST_F(BrokenModel, UnsupportedModelTypeIsNamed) {
  std::ofstream(dir_.file("config.json")) << R"({"model_type":"rwkv99","architectures":["Rwkv99ForCausalLM"],
    "vocab_size":512,"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4})";
  auto msg = load_error();
  EXPECT_NE(msg.find("unsupported model_type 'rwkv99'"), std::string::npos) << msg;
}

TEST_F(BrokenModel, NonJsonConfigIsNamed) {
  std::ofstream(dir_.file("config.json")) << "{\"model_type\": ";
  auto msg = load_error();
  EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
}

TEST_F(BrokenModel, MissingConfigFieldIsNamed) {
  std::ofstream(dir_.file("config.json")) << R"({"model_type":"qwen3","vocab_size":512,"num_hidden_layers":2,"num_attention_heads":4})";
  auto msg = load_error();
  EXPECT_NE(msg.find("'hidden_size'"), std::string::npos) << msg;
}

// --- config.json spellings ------------------------------------------------------------

TEST(Config, V4AndV5SpellingsAgree) {
  for (const char* arch : {"llama", "qwen2", "qwen3", "mistral"}) {
    const fs::path dir = fs::path(TACHYON_SOURCE_DIR) / "tests/fixtures/hf" / arch;
    auto v5 = parse_model_config(parse_json(read_file((dir / "config.json").string()), "v5"), "v5");
    auto v4 = parse_model_config(parse_json(read_file((dir / "config.legacy.json").string()), "v4"), "v4");
    EXPECT_EQ(v5.layer_types, v4.layer_types) << arch;
    EXPECT_EQ(v5.sliding_window, v4.sliding_window) << arch;
    EXPECT_EQ(v5.head_dim, v4.head_dim) << arch;
    EXPECT_EQ(v5.dtype, v4.dtype) << arch;
    const auto &r5 = v5.rope_for("full_attention"), &r4 = v4.rope_for("full_attention");
    EXPECT_EQ(r5.rope_type, r4.rope_type) << arch;
    EXPECT_EQ(r5.rope_theta, r4.rope_theta) << arch;
    EXPECT_EQ(r5.factor, r4.factor) << arch;
    EXPECT_EQ(r5.original_max_position_embeddings, r4.original_max_position_embeddings) << arch;
  }
}

TEST(Config, GenerationConfigReadsEosList) {
  auto g = load_generation_config(std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo");
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{8181, 8179}));
}

}  // namespace
}  // namespace tachyon::io
