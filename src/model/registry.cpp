#include "model/registry.h"

#include <map>

#include "base/error.h"

namespace tachyon::model {

namespace {
struct Entry {
  std::vector<std::string> architectures;
  std::string model_type;
  ArchFactory factory;
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

std::vector<std::string> supported_model_types() {
  register_builtin_architectures();
  std::vector<std::string> types;
  for (const auto& e : entries()) types.push_back(e.model_type);
  return types;
}

std::unique_ptr<Model> load_model(const std::string& dir, kernels::Backend& backend) {
  register_builtin_architectures();
  io::ModelConfig config = io::load_model_config(dir);
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
  auto checkpoint = std::make_shared<io::Checkpoint>(io::Checkpoint::open(dir));
  return found->factory(config, std::move(checkpoint), backend);
}

}  // namespace tachyon::model
