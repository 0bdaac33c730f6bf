// The model on the device(s) a command names: one backend, or `--tensor-parallel N` ranks, one
// per GPU ("cuda": cuda:0 .. cuda:N-1) or N shares of the CPU's cores ("cpu"), run as one model
// (model/tensor_parallel_model.h).
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "kernels/backend.h"
#include "model/model.h"

namespace tachyon::cli {

void add_tensor_parallel_option(CLI::App& command, int& value);

struct DeviceModel {
  std::unique_ptr<kernels::Backend> backend;  // null under tensor parallelism: the model owns its ranks'
  std::unique_ptr<model::Model> model;
  kernels::Backend& device() { return model->backend(); }  // where the engine's host reads happen (rank 0)
};

// Throws naming the problem: a device that does not exist, fewer GPUs than ranks, a model that
// does not split (model/shard_plan.h).
DeviceModel load_device_model(const std::string& dir, const std::string& device, int tensor_parallel,
                              const model::LoadOptions& options);

}  // namespace tachyon::cli
