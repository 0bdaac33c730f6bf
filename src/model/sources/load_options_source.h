// Load options as a WeightSource: hands out another source's tensors unchanged, asks WeightBinder
// to quantize the dense float matmul weights (`--quantize`, WeightSource::matmul_quantization) or
// to give them quantized decode copies (`--quantize-decode`, decode_quantization), and reports each
// bound weight and decode copy to callbacks (`tachyon info`'s bytes per format).
#pragma once

#include <functional>
#include <memory>

#include "model/sources/weight_source.h"

namespace tachyon::model {

class LoadOptionsSource : public WeightSource {
 public:
  using OnBound = std::function<void(const std::string& name, const Weight& host)>;
  LoadOptionsSource(std::shared_ptr<WeightSource> inner, kernels::QuantizeMode mode, OnBound on_bound,
                    kernels::QuantizeMode decode_mode = kernels::QuantizeMode::None, OnBound on_decode_copy = {})
      : inner_(std::move(inner)),
        mode_(mode),
        on_bound_(std::move(on_bound)),
        decode_mode_(decode_mode),
        on_decode_copy_(std::move(on_decode_copy)) {}
  const std::string& location() const override { return inner_->location(); }
  bool has(const std::string& name) const override { return inner_->has(name); }
  Info info(const std::string& name) const override { return inner_->info(name); }
  std::vector<std::string> names() const override { return inner_->names(); }
  HostTensor load(const std::string& name) const override { return inner_->load(name); }
  kernels::QuantizeMode matmul_quantization() const override { return mode_; }
  kernels::QuantizeMode decode_quantization() const override { return decode_mode_; }
  void bound(const std::string& name, const Weight& host) const override {
    if (on_bound_) on_bound_(name, host);
  }
  void bound_decode_copy(const std::string& name, const Weight& host) const override {
    if (on_decode_copy_) on_decode_copy_(name, host);
  }
  int tensor_parallel_ranks() const override { return inner_->tensor_parallel_ranks(); }

 private:
  std::shared_ptr<WeightSource> inner_;
  kernels::QuantizeMode mode_;
  OnBound on_bound_;
  kernels::QuantizeMode decode_mode_;
  OnBound on_decode_copy_;
};

}  // namespace tachyon::model
