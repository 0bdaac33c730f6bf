// The plain WeightSource: float tensors (F32, BF16, F16) of safetensors files, handed out as
// they are mapped.
#pragma once

#include <memory>

#include "io/safetensors.h"
#include "model/sources/weight_source.h"

namespace tachyon::model {

class SafetensorsSource : public WeightSource {
 public:
  explicit SafetensorsSource(std::shared_ptr<io::Checkpoint> checkpoint) : checkpoint_(std::move(checkpoint)) {}
  const std::string& location() const override { return checkpoint_->location(); }
  bool has(const std::string& name) const override { return checkpoint_->has(name); }
  Info info(const std::string& name) const override;
  std::vector<std::string> names() const override;
  HostTensor load(const std::string& name) const override;
  const io::Checkpoint& checkpoint() const { return *checkpoint_; }

 private:
  std::shared_ptr<io::Checkpoint> checkpoint_;
};

}  // namespace tachyon::model
