// A config that declares MTP heads must carry every head tensor: a missing one is named.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "base/json.h"
#include "io/config.h"
#include "kernels/backend.h"
#include "model/mtp_head.h"

namespace tachyon::model {
namespace {

namespace fs = std::filesystem;

TEST(MtpHead, MissingHeadTensorIsNamed) {
  const fs::path demo = fs::path(TACHYON_SOURCE_DIR) / "models/tachyon-demo";
  const fs::path dir = fs::temp_directory_path() / ("tachyon-mtp-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(demo))
    if (e.path().extension() == ".safetensors" || e.path().filename() == "config.json")
      fs::create_symlink(e.path(), dir / e.path().filename());
  Json index = parse_json(read_file((demo / "model.safetensors.index.json").string()), "index");
  index["weight_map"].erase("mtp.layers.0.self_attn.k_norm.weight");
  std::ofstream(dir / "model.safetensors.index.json") << index.dump();
  auto backend = kernels::make_backend("cpu");
  const auto config = io::load_model_config(dir.string());
  try {
    MtpHead::load(dir.string(), config, *backend);
    FAIL() << "loaded an MTP head with a missing tensor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'mtp.layers.0.self_attn.k_norm.weight' is missing"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(MtpHead, ConfigWithoutMtpHasNoHead) {
  auto backend = kernels::make_backend("cpu");
  const std::string qwen3 = std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/hf/qwen3";
  EXPECT_EQ(MtpHead::load(qwen3, io::load_model_config(qwen3), *backend), nullptr);
}

}  // namespace
}  // namespace tachyon::model
