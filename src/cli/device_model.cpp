#include "cli/device_model.h"

#include "base/error.h"
#include "model/tensor_parallel_model.h"

namespace tachyon::cli {

void add_tensor_parallel_option(CLI::App& command, int& value) {
  command
      .add_option("--tensor-parallel", value,
                  "Split the model over N devices (one rank per GPU; on the CPU, N shares of the cores): "
                  "attention heads and MLP features sharded, one all-reduce per sub-block")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
}

namespace {

std::vector<std::unique_ptr<kernels::Backend>> rank_backends(const std::string& device, int n) {
  std::vector<std::unique_ptr<kernels::Backend>> backends;
  if (device == "cuda") {
    const std::string probe = kernels::default_device();  // "cuda" only when a GPU is visible
    if (probe != "cuda") throw Error("--tensor-parallel {} --device cuda: no CUDA device is visible", n);
    for (int r = 0; r < n; ++r) {
      try {
        backends.push_back(kernels::make_backend("cuda:" + std::to_string(r)));
      } catch (const Error& e) {
        throw Error("--tensor-parallel {} needs {} GPUs, one per rank: {}", n, n, e.what());
      }
    }
    return backends;
  }
  if (device.rfind("cuda:", 0) == 0)
    throw Error("--tensor-parallel {} takes --device cuda (ranks on cuda:0 .. cuda:{}), not {}", n, n - 1, device);
  for (int r = 0; r < n; ++r) backends.push_back(kernels::make_backend(device));
  return backends;
}

}  // namespace

DeviceModel load_device_model(const std::string& dir, const std::string& device, int tensor_parallel,
                              const model::LoadOptions& options) {
  DeviceModel loaded;
  if (tensor_parallel <= 1) {
    loaded.backend = kernels::make_backend(device);
    loaded.model = model::load_model(dir, *loaded.backend, options);
    return loaded;
  }
  loaded.model = model::load_tensor_parallel_model(dir, rank_backends(device, tensor_parallel), options);
  return loaded;
}

}  // namespace tachyon::cli
