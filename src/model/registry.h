// Architectures register by their Hugging Face `architectures` string and `model_type`.
//
//   static const bool registered = register_architecture(
//       {"Qwen3ForCausalLM"}, "qwen3", [](const io::ModelConfig& c, const io::Checkpoint& w, kernels::Backend& b) {
//         return std::make_unique<...>(...);
//       });
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/config.h"
#include "io/safetensors.h"
#include "model/model.h"

namespace tachyon::model {

using ArchFactory = std::function<std::unique_ptr<Model>(const io::ModelConfig&, std::shared_ptr<io::Checkpoint>,
                                                         kernels::Backend&)>;

bool register_architecture(std::vector<std::string> hf_architectures, std::string model_type, ArchFactory factory);
std::vector<std::string> supported_model_types();

// Links every architecture file into the binary (static registration needs a reference).
void register_builtin_architectures();

}  // namespace tachyon::model
