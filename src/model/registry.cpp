#include "model/registry.h"

#include <map>

#include "base/error.h"
#include "model/sources/bare_model_source.h"
#include "model/sources/load_options_source.h"
#include "model/sources/sharded_source.h"

namespace tachyon::model {

namespace {
struct Entry {
  std::vector<std::string> architectures;
  std::string model_type;
  ArchFactory factory;
  DecoderSpecFactory spec;  // decoder-family architectures only
};
std::vector<Entry>& entries() {
  static std::vector<Entry> e;
  return e;
}
}  // namespace

bool register_architecture(std::vector<std::string> hf_architectures, std::string model_type, ArchFactory factory) {
  entries().push_back({std::move(hf_architectures), std::move(model_type), std::move(factory)});
  return true;
}

bool register_decoder_architecture(std::vector<std::string> hf_architectures, std::string model_type,
                                   DecoderSpecFactory spec) {
  ArchFactory factory = [spec](const io::ModelConfig& c, std::shared_ptr<WeightSource> ckpt, kernels::Backend& be) {
    return make_decoder_model(c, std::move(ckpt), be, spec(c));
  };
  entries().push_back({std::move(hf_architectures), std::move(model_type), std::move(factory), std::move(spec)});
  return true;
}

std::vector<std::string> supported_model_types() {
  register_builtin_architectures();
  std::vector<std::string> types;
  for (const auto& e : entries()) types.push_back(e.model_type);
  return types;
}

namespace {
const Entry& entry_of(const io::ModelConfig& config) {
  register_builtin_architectures();
  const Entry* found = nullptr;
  for (const auto& e : entries()) {
    for (const auto& a : config.architectures)
      if (std::find(e.architectures.begin(), e.architectures.end(), a) != e.architectures.end()) found = &e;
    if (!found && e.model_type == config.model_type) found = &e;
    if (found) break;
  }
  if (!found) {
    std::string list;
    for (const auto& t : supported_model_types()) list += (list.empty() ? "" : ", ") + t;
    throw Error("{}: unsupported model_type '{}' (supported: {})", config.path, config.model_type, list);
  }
  return *found;
}
}  // namespace

DecoderSpec decoder_spec_of(const io::ModelConfig& config) {
  const Entry& e = entry_of(config);
  if (!e.spec) throw Error("{}: model_type '{}' is not built from decoder layers", config.path, config.model_type);
  return e.spec(config);
}

std::unique_ptr<Model> load_model(const std::string& dir, kernels::Backend& backend) {
  return load_model(dir, backend, LoadOptions{});
}

std::unique_ptr<Model> load_model(const std::string& dir, kernels::Backend& backend, const LoadOptions& options) {
  io::ModelConfig config = io::load_model_config(dir);
  const Entry* found = &entry_of(config);
  std::shared_ptr<WeightSource> source = wrap_bare_model(open_weight_source(dir, config));
  const bool int8_activations = options.int8_activations == kernels::Int8ActivationMode::On ||
                                (options.int8_activations == kernels::Int8ActivationMode::Auto &&
                                 source->int8_activation_numerics());
  // For this model's uploads only: another model loaded on the backend (a drafter) decides its own.
  struct Int8Scope {
    kernels::Backend& backend;
    bool before;
    ~Int8Scope() { backend.set_int8_activations(before); }
  } int8_scope{backend, backend.int8_activations()};
  backend.set_int8_activations(int8_activations);
  if (options.shard) {
    source = std::make_shared<ShardedSource>(std::move(source), *options.shard, options.rank);
    config = options.shard->rank_config;
  }
  const kernels::QuantizeMode decode = options.quantize_decode;
  if (decode != kernels::QuantizeMode::None) {
    if (decode != kernels::QuantizeMode::Int8 && decode != kernels::QuantizeMode::Int4)
      throw Error("--quantize-decode {}: expected int8 or int4", kernels::quantize_mode_name(decode));
    if (options.quantize != kernels::QuantizeMode::None)
      throw Error("--quantize {} and --quantize-decode {}: give one of them", kernels::quantize_mode_name(options.quantize),
                  kernels::quantize_mode_name(decode));
    if (const std::string method = quantization_method(config); !method.empty())
      throw Error("--quantize-decode {}: {} is quantized already ({}); it needs a bf16, f16 or f32 checkpoint",
                  kernels::quantize_mode_name(decode), dir, method);
  }
  if (options.quantize != kernels::QuantizeMode::None || decode != kernels::QuantizeMode::None || options.on_weight)
    source = std::make_shared<LoadOptionsSource>(std::move(source), options.quantize, options.on_weight, decode,
                                                 options.on_decode_weight);
  std::unique_ptr<Model> model = found->factory(config, std::move(source), backend);
  if (decode != kernels::QuantizeMode::None && !model->has_decode_weights())
    throw Error("--quantize-decode {}: {} has no bf16, f16 or f32 matmul weight to quantize; it needs a float checkpoint",
                kernels::quantize_mode_name(decode), dir);
  return model;
}

}  // namespace tachyon::model
