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
#include "model/sources/weight_source.h"
#include "model/blocks/decoder.h"
#include "model/model.h"

namespace tachyon::model {

using ArchFactory = std::function<std::unique_ptr<Model>(const io::ModelConfig&, std::shared_ptr<WeightSource>,
                                                         kernels::Backend&)>;

bool register_architecture(std::vector<std::string> hf_architectures, std::string model_type, ArchFactory factory);

// The decoder-family architectures register how they read a config into a DecoderSpec; the
// model is then make_decoder_model over it, and other parts built from the same layers (MTP
// heads) can ask for the spec.
using DecoderSpecFactory = std::function<DecoderSpec(const io::ModelConfig&)>;
bool register_decoder_architecture(std::vector<std::string> hf_architectures, std::string model_type,
                                   DecoderSpecFactory spec);
// The DecoderSpec of `config`'s architecture; throws when it is not a decoder-family one.
DecoderSpec decoder_spec_of(const io::ModelConfig& config);
std::vector<std::string> supported_model_types();

// Links every architecture file into the binary (static registration needs a reference).
void register_builtin_architectures();

}  // namespace tachyon::model
