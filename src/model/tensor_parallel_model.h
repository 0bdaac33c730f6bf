// Tensor parallelism as one Model: N ranks, each a shard of the same checkpoint on its own
// backend (model/shard_plan.h says which slice of which tensor), run together on every forward.
// The engine, scheduler and speculation above see a single model: one KvCache (its blocks,
// tables and prefix cache are shared; each rank keeps its own KV heads as a storage replica,
// kv::KvCache::add_replica), full logits and hidden states (rank 0's; every rank computes the
// same bits, because the row-parallel partial sums are added in rank order).
//
// Rank 0 runs on the caller's thread, ranks 1..N-1 on a thread each; each rank installs a CPU
// thread pool of its own (a CPU "device" is a share of the cores). A rank that fails aborts the
// group: the others wake with an error and the model stays unusable (it is reloaded).
//
//   std::vector<std::unique_ptr<kernels::Backend>> devices;   // one per rank
//   auto model = load_tensor_parallel_model(dir, std::move(devices), options);
//   kv::KvCache kv(model->backend(), model->kv_layout(256));  // replicas are added on first use
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/model.h"

namespace tachyon::model {

std::unique_ptr<Model> load_tensor_parallel_model(const std::string& dir,
                                                  std::vector<std::unique_ptr<kernels::Backend>> backends,
                                                  const LoadOptions& options);

}  // namespace tachyon::model
