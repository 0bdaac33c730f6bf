// One rank's view of a checkpoint under tensor parallelism: hands out each tensor's slice that
// the ShardPlan gives rank `rank` (model/shard_plan.h), with the shape the rank's model binds.
// Row slices of dense tensors point into the inner source's mapping (no copy); column slices
// and zeroed biases are built. A quantized tensor can be split by rows (its groups run along a
// row); splitting its columns is refused naming the tensor.
#pragma once

#include <memory>

#include "model/shard_plan.h"
#include "model/sources/weight_source.h"

namespace tachyon::model {

class ShardedSource : public WeightSource {
 public:
  ShardedSource(std::shared_ptr<WeightSource> inner, ShardPlan plan, int rank);
  const std::string& location() const override { return inner_->location(); }
  bool has(const std::string& name) const override { return inner_->has(name); }
  Info info(const std::string& name) const override;
  std::vector<std::string> names() const override { return inner_->names(); }
  HostTensor load(const std::string& name) const override;
  kernels::QuantizeMode matmul_quantization() const override { return inner_->matmul_quantization(); }
  void bound(const std::string& name, const Weight& host) const override { inner_->bound(name, host); }
  int tensor_parallel_ranks() const override { return plan_.world; }

 private:
  std::shared_ptr<WeightSource> inner_;
  ShardPlan plan_;
  int rank_;
};

}  // namespace tachyon::model
