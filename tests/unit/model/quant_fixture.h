// Test helpers for tests/fixtures/quant (tools/make_quant_fixtures.py): a case's quantized
// checkpoint, the float model it means (its float tensors + dequantized.safetensors, assembled in
// a temporary directory), and edited copies for fail-closed tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "base/json.h"
#include "io/safetensors.h"

namespace tachyon::testing {

namespace fs = std::filesystem;

inline fs::path quant_fixture(const std::string& name) {
  return fs::path(TACHYON_SOURCE_DIR) / "tests/fixtures/quant" / name;
}

// A temporary model directory removed with the object.
class TempModel {
 public:
  explicit TempModel(const std::string& tag)
      : dir_(fs::temp_directory_path() / ("tachyon-quant-" + tag + "-" + std::to_string(::getpid()))) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~TempModel() { fs::remove_all(dir_); }
  TempModel(const TempModel&) = delete;
  TempModel& operator=(const TempModel&) = delete;
  std::string path() const { return dir_.string(); }
  void write_config(const Json& config) const { std::ofstream(dir_ / "config.json") << config.dump(2); }
  void write_tensors(const std::vector<io::TensorToWrite>& tensors) const {
    io::write_safetensors((dir_ / "model.safetensors").string(), tensors);
  }

 private:
  fs::path dir_;
};

inline Json read_json_file(const fs::path& p) { return parse_json(read_file(p.string()), p.string()); }

inline bool is_float(DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; }

// The float model a case means, as the script's dequantized_model_dir builds it.
inline void write_dequantized_model(const std::string& name, const TempModel& out) {
  const fs::path dir = quant_fixture(name);
  const auto quant = io::Checkpoint::open_file((dir / "model.safetensors").string());
  const auto deq = io::Checkpoint::open_file((dir / "dequantized.safetensors").string());
  static const char* kCompanions[] = {"scales", "biases", "_scale_inv", "qzeros", "g_idx", "weight_scale",
                                      "weight_zero_point"};
  std::vector<io::TensorToWrite> tensors;
  for (const auto& [n, t] : quant.tensors()) {
    if (!is_float(t.dtype) || deq.has(n)) continue;
    bool companion = false;
    for (const char* c : kCompanions) companion = companion || n.ends_with(c);
    if (!companion) tensors.push_back({n, t.dtype, t.shape, t.data});
  }
  for (const auto& [n, t] : deq.tensors()) tensors.push_back({n, t.dtype, t.shape, t.data});
  out.write_tensors(tensors);
  out.write_config(read_json_file(dir / "dequantized.config.json"));
}

// A copy of a case with its config and tensors edited.
inline void write_edited_case(const std::string& name, const TempModel& out, const std::function<void(Json&)>& edit_config,
                              const std::function<void(std::vector<io::TensorToWrite>&)>& edit_tensors) {
  const fs::path dir = quant_fixture(name);
  Json config = read_json_file(dir / "config.json");
  if (edit_config) edit_config(config);
  out.write_config(config);
  const auto quant = io::Checkpoint::open_file((dir / "model.safetensors").string());
  std::vector<io::TensorToWrite> tensors;
  for (const auto& [n, t] : quant.tensors()) tensors.push_back({n, t.dtype, t.shape, t.data});
  if (edit_tensors) edit_tensors(tensors);
  out.write_tensors(tensors);
}

}  // namespace tachyon::testing
